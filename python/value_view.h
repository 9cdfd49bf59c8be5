// tierkv.ValueView: a read-only, zero-copy view of one value in the manager's
// shared pool, held by a pin (tierkv::Client::Pin) until released.
//
// Lifetime: the view exports its bytes through the buffer protocol
// (memoryview(view), numpy.frombuffer(view), ...) until release(); after it,
// taking a new buffer raises ValueError. Buffers taken before release() keep
// the pin, and so the bytes, until the last of them is released; the pin ends
// then. No buffer ever shows another value's bytes while it is held, except
// after the client's connection ends (close(), a reconnect): the manager
// drops the connection's pins, and taking a buffer raises ValueError.
//
// Thread-safety: every method runs with the GIL held; the unpin releases it.
#ifndef TIERKV_PYTHON_VALUE_VIEW_H_
#define TIERKV_PYTHON_VALUE_VIEW_H_

#include <pybind11/pybind11.h>

#include <memory>

#include "tierkv/client.h"

namespace tierkv::python {

class ValueView {
 public:
  ValueView(std::weak_ptr<Client> client, PinnedValue pin)
      : client_(std::move(client)), pin_(std::move(pin)) {}
  ~ValueView() { UnpinOnce(); }
  ValueView(const ValueView&) = delete;
  ValueView& operator=(const ValueView&) = delete;

  // Ends the view: no new buffer is handed out; the pin goes once no buffer
  // taken from the view is held. Idempotent.
  void Release();
  bool released() const { return released_; }
  // Whether the bytes are still the value's: not released and the pin held.
  bool valid() const;
  size_t size() const { return pin_.size; }
  // The context manager's memoryview (taken by Enter, released by Exit).
  pybind11::object Enter(pybind11::object self);
  void Exit();

  // Registers the class and its buffer slots in `m`.
  static void Register(pybind11::module_& m);

 private:
  static int GetBuffer(PyObject* self, Py_buffer* view, int flags);
  static void ReleaseBuffer(PyObject* self, Py_buffer* view);
  void UnpinOnce();

  std::weak_ptr<Client> client_;
  PinnedValue pin_;
  Py_ssize_t exports_ = 0;
  bool released_ = false;
  bool unpinned_ = false;
  pybind11::object entered_;  // the memoryview __enter__ returned
};

}  // namespace tierkv::python

#endif  // TIERKV_PYTHON_VALUE_VIEW_H_
