#pragma once
/// @file epstack.hpp
/// @brief The public API in one include (target epstack::epstack): the layers in the order of the data flow, and the
/// CPU provider every session falls back to. It only includes; include a layer's headers alone to compile less.
/// Other providers are included by name (<epstack/providers/dnnl.hpp>, target epstack::dnnl).

// core: errors, element types, tensors, runtime values, options.
#include <epstack/core/errors.hpp>
#include <epstack/core/element_type.hpp>
#include <epstack/core/float16.hpp>
#include <epstack/core/shape.hpp>
#include <epstack/core/type_info.hpp>
#include <epstack/core/tensor.hpp>
#include <epstack/core/ivalue.hpp>
#include <epstack/core/session_options.hpp>
// ir: graphs, attributes, models.
#include <epstack/ir/attribute.hpp>
#include <epstack/ir/graph.hpp>
#include <epstack/ir/graph_view.hpp>
#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/ir/model.hpp>
// onnx: models in and out.
#include <epstack/onnx/onnx_io.hpp>
// provider: the provider contract, what providers compile to, their binding, the EP context binary.
#include <epstack/provider/contract.hpp>
#include <epstack/provider/binding.hpp>
// partition: the partitioner and its plan.
#include <epstack/partition/partitioner.hpp>
// ep_context: EPContext models.
#include <epstack/ep_context/attributes.hpp>
#include <epstack/ep_context/report.hpp>
// runtime: the optimiser, sessions, compile_model.
#include <epstack/runtime/optimizer.hpp>
#include <epstack/runtime/session.hpp>
#include <epstack/runtime/compile_model.hpp>
// The CPU provider: the fallback of every session.
#include <epstack/providers/cpu.hpp>
