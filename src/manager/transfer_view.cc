#include "manager/transfer_view.h"

namespace tierkv {

RemoteReadStats TransferView::Transfer() const {
  RemoteReadStats s = fetcher_->Stats();
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
  if (const PeerServer* peer = peer_.load()) {
    const PeerGateStats p = peer->GateStats();
    s.peer_connections = p.connections;
    s.peer_accepted = p.accepted;
    s.peer_shed = p.shed;
    s.peer_handshake_timeouts = p.handshake_timeouts;
    s.peer_idle_closed = p.idle_closed;
    s.peer_backend_failures = p.backend_failures;
  }
  return s;
}

}  // namespace tierkv
