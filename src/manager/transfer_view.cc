#include "manager/transfer_view.h"

namespace tierkv {

TransferStats TransferView::Transfer() const {
  TransferStats s = fetcher_->Stats();
  const GrantStats g = grants_->Stats();
  s.grants_live = g.sessions;
  s.reserved_bytes = g.reserved_bytes;
  s.budget_bytes = g.budget_bytes;
  s.grants_given = g.authorizations;
  s.items_granted = g.items_granted;
  s.refused_stale = g.refused_stale;
  s.refused_budget = g.refused_budget;
  s.refused_sessions = g.refused_sessions;
  s.refused_other = g.refused_other;
  s.budget_waits = g.budget_waits;
  s.released = g.released;
  s.expired = g.expired;
  s.departed = g.departed;
  const transfer::DataServerStats d = data_->Stats();
  s.data_connections = d.connections;
  s.data_connections_total = d.connections_total;
  s.data_refused = d.refused;
  s.data_shed = d.shed;
  s.data_reads = d.reads;
  s.data_refusals = d.refusals;
  s.data_bytes_out = d.bytes_out;
  s.data_checksums_reused = d.checksums_reused;
  s.data_decided_at_once = d.decided_at_once;
  s.data_decided_on_pool = d.decided_on_pool;
  return s;
}

}  // namespace tierkv
