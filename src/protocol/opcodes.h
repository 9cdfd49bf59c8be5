// The client protocol's one table of request kinds. Everything that knows an
// opcode is generated from it: the Opcode enum (frame.h), OpcodeName, the
// latency tracepoint each kind is counted under (OpcodeTracepoint) and the
// manager's dispatch (server/request_handler.cc), so a kind added here that
// the manager does not handle fails to link.
//
//   X(enumerator, value, wire name, tracepoint)
//
// The tracepoints are the REST contract's operations: a lease is a get, a
// commit an update_state; a locate is a get without a lease, a pin a get whose
// lease lasts and an unpin its release.
#ifndef TIERKV_PROTOCOL_OPCODES_H_
#define TIERKV_PROTOCOL_OPCODES_H_

#define TIERKV_OPCODES(X)                                               \
  X(kHello, 1, "hello", "TP_MMC_META_HELLO")                            \
  X(kAlloc, 2, "alloc", "TP_MMC_META_ALLOC")                            \
  X(kCommit, 3, "commit", "TP_MMC_META_UPDATE_STATE")                   \
  X(kAbort, 4, "abort", "TP_MMC_META_ABORT")                            \
  X(kPut, 5, "put", "TP_MMC_META_PUT")                                  \
  X(kLease, 6, "lease", "TP_MMC_META_GET")                              \
  X(kRelease, 7, "release", "TP_MMC_META_RELEASE")                      \
  X(kGet, 8, "get", "TP_MMC_META_GET_INLINE")                           \
  X(kExist, 9, "exist", "TP_MMC_META_EXIST_KEY")                        \
  X(kQuery, 10, "query", "TP_MMC_META_QUERY")                           \
  X(kRemove, 11, "remove", "TP_MMC_META_REMOVE")                        \
  X(kRemoveAll, 12, "remove_all", "TP_MMC_META_REMOVE_ALL")             \
  X(kListKeys, 13, "list_keys", "TP_MMC_META_GET_ALL_KEYS")             \
  X(kLocate, 14, "locate", "TP_MMC_META_GET")                           \
  X(kPin, 15, "pin", "TP_MMC_META_GET")                                 \
  X(kUnpin, 16, "unpin", "TP_MMC_META_RELEASE")                         \
  X(kBatchAlloc, 20, "batch_alloc", "TP_MMC_META_BATCH_ALLOC")          \
  X(kBatchCommit, 21, "batch_commit", "TP_MMC_META_BATCH_UPDATE_STATE") \
  X(kBatchLease, 22, "batch_lease", "TP_MMC_META_BATCH_GET")            \
  X(kBatchRelease, 23, "batch_release", "TP_MMC_META_BATCH_RELEASE")    \
  X(kBatchPut, 24, "batch_put", "TP_MMC_META_BATCH_PUT")                \
  X(kBatchGet, 25, "batch_get", "TP_MMC_META_BATCH_GET_INLINE")         \
  X(kBatchExist, 26, "batch_exist", "TP_MMC_META_BATCH_EXIST_KEY")      \
  X(kBatchQuery, 27, "batch_query", "TP_MMC_META_BATCH_QUERY")          \
  X(kBatchRemove, 28, "batch_remove", "TP_MMC_META_BATCH_REMOVE")       \
  X(kReportMetrics, 29, "report_metrics", "TP_MMC_META_REPORT_METRICS") \
  X(kBatchLocate, 30, "batch_locate", "TP_MMC_META_BATCH_GET")          \
  X(kRegister, 31, "register", "TP_MMC_META_REGISTER")                  \
  X(kUnregister, 32, "unregister", "TP_MMC_META_UNREGISTER")            \
  X(kBatchGetInto, 33, "batch_get_into", "TP_MMC_META_BATCH_GET")

#endif  // TIERKV_PROTOCOL_OPCODES_H_
