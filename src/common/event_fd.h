// Wake-ups through an eventfd: the loops of the client server and the REST gate
// sleep in epoll with one in their set, and Stop (or a finished job) pokes it.
#ifndef TIERKV_COMMON_EVENT_FD_H_
#define TIERKV_COMMON_EVENT_FD_H_

#include <unistd.h>

#include <cstdint>

namespace tierkv {

// Adds one to the eventfd's counter, which makes it readable. Errors are
// ignored: the only possible one, a full counter, still leaves it readable.
inline void PokeEventFd(int fd) {
  const uint64_t one = 1;
  (void)!write(fd, &one, sizeof(one));
}

}  // namespace tierkv

#endif  // TIERKV_COMMON_EVENT_FD_H_
