// CNTK's cntk.logging.graph: the walks over a graph's nodes (depth_first_search, find_by_name,
// find_all_with_name, find_by_uid, get_node_outputs).
#include "python/src/binding.h"

namespace loom::python {

py::object node_object(const GraphNode& node) {
  if (const auto* f = std::get_if<Function>(&node)) return py::cast(*f);
  const Variable& v = std::get<Variable>(node);
  if (v.is_parameter()) return py::cast(Parameter(v));
  if (v.is_constant()) return py::cast(Constant(v));
  return py::cast(v);
}

py::list node_objects(const std::vector<GraphNode>& nodes) {
  py::list out;
  for (const GraphNode& n : nodes) out.append(node_object(n));
  return out;
}

py::object find_one_by_name(const Function& root, const std::string& name, int depth) {
  std::vector<GraphNode> found = find_all_with_name(root, name, depth);
  if (found.size() > 1)
    throw py::value_error("found multiple functions matching \"" + name +
                          "\". If that was expected call find_all_with_name");
  return found.empty() ? py::object(py::none()) : node_object(found[0]);
}

void add_logging_graph(py::module_ m) {
  m.def(
      "depth_first_search",
      [](const Function& root, const py::function& visitor, int depth) {
        return node_objects(depth_first_search(
            root, [&](const GraphNode& n) { return visitor(node_object(n)).cast<bool>(); }, depth));
      },
      py::arg("root"), py::arg("visitor"), py::arg("depth") = kBlocksAsNodes);
  m.def(
      "find_by_name",
      [](const Function& node, const std::string& node_name, int depth) {
        return find_one_by_name(node, node_name, depth);
      },
      py::arg("node"), py::arg("node_name"), py::arg("depth") = kBlocksAsNodes);
  m.def(
      "find_all_with_name",
      [](const Function& node, const std::string& node_name, int depth) {
        return node_objects(find_all_with_name(node, node_name, depth));
      },
      py::arg("node"), py::arg("node_name"), py::arg("depth") = kBlocksAsNodes);
  m.def(
      "find_by_uid",
      [](const Function& node, const std::string& node_uid, int depth) -> py::object {
        std::vector<GraphNode> found = depth_first_search(
            node, [&](const GraphNode& n) { return uid_of(n) == node_uid; }, depth);
        return found.empty() ? py::object(py::none()) : node_object(found[0]);
      },
      py::arg("node"), py::arg("node_uid"), py::arg("depth") = kBlocksAsNodes);
  m.def(
      "get_node_outputs", [](const Function& node, int depth) { return node_outputs(node, depth); },
      py::arg("node"), py::arg("depth") = kBlocksAsNodes);
}

}  // namespace loom::python
