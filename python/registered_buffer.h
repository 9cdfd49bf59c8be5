// tierkv.RegisteredBuffer: memory registered with the manager
// (tierkv::Client::RegisterBuffer) that gets write into directly. It exports
// its bytes, writable, through the buffer protocol (memoryview(buf),
// numpy.frombuffer(buf, ...), torch.frombuffer(buf, ...)); a get into any part
// of it (get_into, batch_get_into, batch_get_parts) is answered by the
// manager writing the value there. The memory stays mapped while the object
// or any buffer taken from it lives, also after unregister_buffer() and
// close().
//
// Thread-safety: every method runs with the GIL held.
#ifndef TIERKV_PYTHON_REGISTERED_BUFFER_H_
#define TIERKV_PYTHON_REGISTERED_BUFFER_H_

#include <pybind11/pybind11.h>

#include "tierkv/client.h"

namespace tierkv::python {

// Registers tierkv.RegisteredBuffer (wrapping a tierkv::RegisteredBuffer) in `m`.
void RegisterRegisteredBuffer(pybind11::module_& m);

}  // namespace tierkv::python

#endif  // TIERKV_PYTHON_REGISTERED_BUFFER_H_
