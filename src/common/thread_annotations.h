// Clang's thread-safety annotations (-Wthread-safety), spelled for tierkv.
// Other compilers see nothing. The store's shards use them: which fields a
// shard's lock guards, which functions must be called with it held. The
// ctest `thread_safety_analysis` builds the annotated boxes with Clang and
// fails on any finding.
#ifndef TIERKV_COMMON_THREAD_ANNOTATIONS_H_
#define TIERKV_COMMON_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define TIERKV_TSA(x) __attribute__((x))
#else
#define TIERKV_TSA(x)
#endif

// A type that is a lock.
#define TIERKV_CAPABILITY(name) TIERKV_TSA(capability(name))
// A RAII type that holds a lock for its lifetime.
#define TIERKV_SCOPED_CAPABILITY TIERKV_TSA(scoped_lockable)
// A field read or written only with `mu` held.
#define TIERKV_GUARDED_BY(mu) TIERKV_TSA(guarded_by(mu))
// A function called only with the locks named held.
#define TIERKV_REQUIRES(...) TIERKV_TSA(requires_capability(__VA_ARGS__))
// A function that takes / gives back the locks named (or `this`).
#define TIERKV_ACQUIRE(...) TIERKV_TSA(acquire_capability(__VA_ARGS__))
#define TIERKV_RELEASE(...) TIERKV_TSA(release_capability(__VA_ARGS__))
#define TIERKV_TRY_ACQUIRE(...) TIERKV_TSA(try_acquire_capability(__VA_ARGS__))
// Tells the analysis the lock is held here (where it cannot see it: a
// callback run under a lock its caller took).
#define TIERKV_ASSERT_CAPABILITY(x) TIERKV_TSA(assert_capability(x))
// A function the analysis skips (one that locks a set of shards in a loop).
#define TIERKV_NO_THREAD_SAFETY_ANALYSIS TIERKV_TSA(no_thread_safety_analysis)

#endif  // TIERKV_COMMON_THREAD_ANNOTATIONS_H_
