#include "registered_buffer.h"

#include <string>

namespace py = pybind11;

namespace tierkv::python {

void RegisterRegisteredBuffer(py::module_& m) {
  py::class_<RegisteredBuffer>(m, "RegisteredBuffer", py::buffer_protocol(),
                               "Memory registered with the manager; gets into it are written "
                               "there by the manager (Client.register_buffer).")
      .def_buffer([](RegisteredBuffer& b) {
        return py::buffer_info(b.data, 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size)}, {1}, /*readonly=*/false);
      })
      .def_property_readonly("id", [](const RegisteredBuffer& b) { return b.id; })
      .def_property_readonly("size", [](const RegisteredBuffer& b) { return b.size; })
      .def_property_readonly(
          "address", [](const RegisteredBuffer& b) { return reinterpret_cast<uintptr_t>(b.data); })
      .def("__len__", [](const RegisteredBuffer& b) { return b.size; })
      .def("__repr__", [](const RegisteredBuffer& b) {
        return "RegisteredBuffer(id=" + std::to_string(b.id) + ", size=" + std::to_string(b.size) +
               ")";
      });
}

}  // namespace tierkv::python
