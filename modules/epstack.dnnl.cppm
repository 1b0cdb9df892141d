// `import epstack.dnnl;`: the oneDNN execution provider as a C++20 module (with `import epstack;` for the rest).
module;
#include <epstack/providers/dnnl.hpp>
export module epstack.dnnl;

export namespace epstack {
using epstack::dnnl_options;
using epstack::dnnl_provider;
}  // namespace epstack
