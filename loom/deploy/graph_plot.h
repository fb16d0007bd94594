// Pictures of a Function's graph (CNTK's logging.graph.plot): Graphviz DOT, rendered to SVG,
// PNG or PDF by graphviz's `dot` program.
#pragma once

#include <string>

#include "loom/graph/function.h"

namespace loom {

// The graph as Graphviz DOT: a box per primitive (its op, and its name when it has one), an
// ellipse per input (name and type), a small box per parameter (its path, as
// Function::parameter takes it, and shape) or constant, an edge per use labelled with the
// shape of the value, and a double ellipse per output of f.
std::string graph_to_dot(const Function& f);

// Writes the graph to path by its extension: .dot as DOT; .svg, .png or .pdf rendered by
// `dot` (Debian's graphviz) run as a subprocess. An ArgumentError for another extension; an
// IOError naming the file when it cannot be written, when `dot` is not installed, or with
// dot's message when it fails.
void plot_graph(const Function& f, const std::string& path);

}  // namespace loom
