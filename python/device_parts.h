// DeviceParts: the GPU-memory parts of the Python client's device puts and
// gets, from per-key lists of (device address, length) pairs.
#ifndef TIERKV_PYTHON_DEVICE_PARTS_H_
#define TIERKV_PYTHON_DEVICE_PARTS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <span>
#include <vector>

#include "tierkv/client.h"

namespace tierkv::python {

namespace py = pybind11;

// The GPU-memory parts of device puts and gets: per key a list of
// (device address, length) pairs.
class DeviceParts {
 public:
  explicit DeviceParts(const py::list& per_key) {
    for (const py::handle& item : per_key) {
      if (!py::isinstance<py::list>(item) && !py::isinstance<py::tuple>(item)) {
        throw py::type_error("the parts of each key are a list of (device address, length)");
      }
      starts_.push_back(regions_.size());
      for (const py::handle& part : item) {
        if (!py::isinstance<py::tuple>(part) || py::len(part) != 2) {
          throw py::type_error("a device part is a (device address, length) pair");
        }
        py::tuple t = py::reinterpret_borrow<py::tuple>(part);
        regions_.push_back({t[0].cast<uint64_t>(), t[1].cast<size_t>()});
      }
    }
    starts_.push_back(regions_.size());
  }
  size_t keys() const { return starts_.size() - 1; }
  std::span<const tierkv::DeviceRegion> Of(size_t key) const {
    return std::span<const tierkv::DeviceRegion>(regions_).subspan(starts_[key],
                                                                   starts_[key + 1] - starts_[key]);
  }

 private:
  std::vector<tierkv::DeviceRegion> regions_;
  std::vector<size_t> starts_;
};

}  // namespace tierkv::python

#endif  // TIERKV_PYTHON_DEVICE_PARTS_H_
