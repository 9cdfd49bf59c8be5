#include "value_view.h"

#include <string>

namespace py = pybind11;

namespace tierkv::python {
namespace {

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

}  // namespace

bool ValueView::valid() const {
  if (released_ || unpinned_) return false;
  std::shared_ptr<Client> c = client_.lock();
  return c != nullptr && c->PinHeld(pin_);
}

void ValueView::Release() {
  released_ = true;
  if (exports_ == 0) UnpinOnce();
}

void ValueView::UnpinOnce() {
  if (unpinned_) return;
  unpinned_ = true;
  std::shared_ptr<Client> c = client_.lock();
  if (c == nullptr || Finalizing()) return;  // the connection's end drops the pin
  // Without the GIL: a call holding the client's lock may be waiting for it.
  py::gil_scoped_release nogil;
  (void)c->Unpin(pin_);
}

py::object ValueView::Enter(py::object self) {
  entered_ = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(self.ptr()));
  if (!entered_) throw py::error_already_set();
  return entered_;
}

void ValueView::Exit() {
  if (entered_) {
    // Fails (BufferError) while buffers taken from the memoryview are held:
    // it then stays usable, and keeps the pin, until they go.
    PyObject* r = PyObject_CallMethod(entered_.ptr(), "release", nullptr);
    if (r == nullptr) PyErr_Clear();
    Py_XDECREF(r);
    entered_ = py::object();
  }
  Release();
}

int ValueView::GetBuffer(PyObject* self, Py_buffer* view, int flags) {
  ValueView* v = nullptr;
  try {
    v = py::handle(self).cast<ValueView*>();
  } catch (const py::cast_error&) {
    PyErr_SetString(PyExc_TypeError, "not a tierkv.ValueView");
    return -1;
  }
  if (v->released_ || v->unpinned_) {
    PyErr_SetString(PyExc_ValueError,
                    "the tierkv.ValueView was released: its bytes may belong to another value "
                    "now (read the key again)");
    view->obj = nullptr;
    return -1;
  }
  if (!v->valid()) {
    PyErr_SetString(PyExc_ValueError,
                    "the connection that held this tierkv.ValueView's pin ended (the client "
                    "was closed or reconnected): its bytes may belong to another value now");
    view->obj = nullptr;
    return -1;
  }
  void* data = const_cast<uint8_t*>(v->pin_.data);
  if (PyBuffer_FillInfo(view, self, data, static_cast<Py_ssize_t>(v->pin_.size), /*readonly=*/1,
                        flags) != 0) {
    return -1;  // a writable buffer was asked for
  }
  ++v->exports_;
  return 0;
}

void ValueView::ReleaseBuffer(PyObject* self, Py_buffer*) {
  ValueView* v = py::handle(self).cast<ValueView*>();
  if (--v->exports_ == 0 && v->released_) v->UnpinOnce();
}

void ValueView::Register(py::module_& m) {
  py::class_<ValueView> cls(m, "ValueView", py::buffer_protocol(),
                            "A read-only, zero-copy view of a value in the shared pool.");
  cls.def("release", &ValueView::Release, "End the view (idempotent).")
      .def_property_readonly("released", &ValueView::released)
      .def_property_readonly("valid", &ValueView::valid,
                             "True while the view's bytes are the value's.")
      .def_property_readonly("nbytes", &ValueView::size)
      .def("__len__", &ValueView::size)
      .def("__enter__", [](py::object self) { return self.cast<ValueView&>().Enter(self); })
      .def("__exit__", [](ValueView& v, py::args) { v.Exit(); })
      .def("__repr__", [](const ValueView& v) {
        return "ValueView(" + std::to_string(v.size()) + " bytes" +
               (v.released() ? ", released" : "") + ")";
      });
  // pybind11's buffer slots hand out copies of a buffer_info; these count the
  // buffers held, so that the pin outlives every one of them.
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  type->tp_as_buffer->bf_getbuffer = &ValueView::GetBuffer;
  type->tp_as_buffer->bf_releasebuffer = &ValueView::ReleaseBuffer;
}

}  // namespace tierkv::python
