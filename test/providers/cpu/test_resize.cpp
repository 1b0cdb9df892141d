// Tests of the CPU Resize kernel (resize.cpp): every ONNX backend case (onnx 1.12 and 1.22 test data, pasted as
// literals), the opset differences, N-linear and cubic modes, Resize-18/19's axes, keep_aspect_ratio_policy,
// antialias and half_pixel_symmetric, types, errors, threads.
#include "misc_support.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

// ---------------------------------------------------------------------------------------------------------------
// ONNX backend test data (onnx 1.12, /usr/share/libonnx-testdata/data/node/test_resize_*), extracted
// with /usr/bin/python3 and onnx.numpy_helper; an omitted input is {}.

namespace {
std::vector<backend_case> resize_backend_cases() {
  std::vector<backend_case> cases;
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_cubic";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.800000012f, 0.800000012f})});
    c.expected = tensor::from<float>({1,1,3,3}, {1.47119141f, 2.78125f, 4.08251953f, 6.71142578f, 8.02148438f, 9.32275391f, 11.9165039f, 13.2265625f, 14.527832f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside";
    c.node = op("Resize", 13);
    c.node.set("cubic_coeff_a", -0.5f);
    c.node.set("exclude_outside", std::int64_t{1});
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.800000012f, 0.800000012f})});
    c.expected = tensor::from<float>({1,1,3,3}, {1.36812675f, 2.6695013f, 4.01333666f, 6.57362509f, 7.875f, 9.21883488f, 11.948966f, 13.2503414f, 14.5941763f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_cubic_align_corners";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("align_corners"));
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.800000012f, 0.800000012f})});
    c.expected = tensor::from<float>({1,1,3,3}, {1.0f, 2.39519167f, 3.7903831f, 6.5807662f, 7.97595787f, 9.37114906f, 12.1615324f, 13.5567236f, 14.9519157f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_linear";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,2,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.600000024f, 0.600000024f})});
    c.expected = tensor::from<float>({1,1,1,2}, {2.66666651f, 4.33333302f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_linear_align_corners";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("align_corners"));
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,2,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.600000024f, 0.600000024f})});
    c.expected = tensor::from<float>({1,1,1,2}, {1.0f, 3.14285707f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_nearest";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.600000024f, 0.600000024f})});
    c.expected = tensor::from<float>({1,1,1,2}, {1.0f, 3.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_cubic";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 3, 3})});
    c.expected = tensor::from<float>({1,1,3,3}, {1.63078701f, 3.00462961f, 4.37847233f, 7.12615728f, 8.5f, 9.87384224f, 12.6215277f, 13.9953699f, 15.3692131f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_linear_pytorch_half_pixel";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("pytorch_half_pixel"));
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 3, 1})});
    c.expected = tensor::from<float>({1,1,3,1}, {1.66666663f, 7.0f, 12.333333f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_nearest";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 1, 3})});
    c.expected = tensor::from<float>({1,1,1,3}, {1.0f, 2.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_nearest_tf_half_pixel_for_nn";
    c.node = op("Resize", 11);
    c.node.set("coordinate_transformation_mode", std::string("tf_half_pixel_for_nn"));
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({empty_tensor<float>()});
    c.inputs.push_back({empty_tensor<float>()});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 3, 2})});
    c.expected = tensor::from<float>({1,1,3,2}, {6.0f, 8.0f, 10.0f, 12.0f, 14.0f, 16.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_tf_crop_and_resize";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
    c.node.set("extrapolation_value", 10.0f);
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({tensor::from<float>({8}, {0.0f, 0.0f, 0.400000006f, 0.600000024f, 1.0f, 1.0f, 1.20000005f, 1.70000005f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 3, 3})});
    c.expected = tensor::from<float>({1,1,3,3}, {7.60000038f, 10.0f, 10.0f, 12.4000006f, 10.0f, 10.0f, 10.0f, 10.0f, 10.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_cubic";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,8,8}, {0.47265625f, 0.76953125f, 1.24609375f, 1.875f, 2.28125f, 2.91015625f, 3.38671875f, 3.68359375f, 1.66015625f, 1.95703125f, 2.43359375f, 3.0625f,
           3.46875f, 4.09765625f, 4.57421875f, 4.87109375f, 3.56640625f, 3.86328125f, 4.33984375f, 4.96875f, 5.375f, 6.00390625f, 6.48046875f, 6.77734375f,
           6.08203125f, 6.37890625f, 6.85546875f, 7.484375f, 7.890625f, 8.51953125f, 8.99609375f, 9.29296875f, 7.70703125f, 8.00390625f, 8.48046875f, 9.109375f,
           9.515625f, 10.1445312f, 10.6210938f, 10.9179688f, 10.2226562f, 10.5195312f, 10.9960938f, 11.625f, 12.03125f, 12.6601562f, 13.1367188f, 13.4335938f,
           12.1289062f, 12.4257812f, 12.9023438f, 13.53125f, 13.9375f, 14.5664062f, 15.0429688f, 15.3398438f, 13.3164062f, 13.6132812f, 14.0898438f, 14.71875f,
           15.125f, 15.7539062f, 16.2304688f, 16.5273438f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside";
    c.node = op("Resize", 13);
    c.node.set("cubic_coeff_a", -0.5f);
    c.node.set("exclude_outside", std::int64_t{1});
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,8,8}, {0.558823526f, 0.814942062f, 1.35698247f, 1.89705884f, 2.39705873f, 2.93713522f, 3.47917557f, 3.7352941f, 1.58329761f, 1.83941603f, 2.38145661f, 2.92153287f,
           3.42153287f, 3.96160913f, 4.50364971f, 4.75976801f, 3.75145936f, 4.0075779f, 4.54961824f, 5.0896945f, 5.5896945f, 6.12977076f, 6.67181158f, 6.92792988f,
           5.91176462f, 6.1678834f, 6.70992374f, 7.25f, 7.75f, 8.29007626f, 8.83211708f, 9.0882349f, 7.91176462f, 8.16788292f, 8.70992374f, 9.25f,
           9.75f, 10.2900763f, 10.8321171f, 11.0882349f, 10.0720701f, 10.3281889f, 10.8702288f, 11.410305f, 11.910305f, 12.4503813f, 12.9924221f, 13.2485409f,
           12.2402315f, 12.4963503f, 13.0383911f, 13.5784674f, 14.0784674f, 14.6185436f, 15.1605835f, 15.4167023f, 13.2647057f, 13.5208244f, 14.0628653f, 14.6029415f,
           15.1029415f, 15.6430178f, 16.1850586f, 16.4411774f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_cubic_align_corners";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("align_corners"));
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 1.34110785f, 1.80029154f, 2.32944608f, 2.67055392f, 3.19970846f, 3.65889215f, 4.0f, 2.36443138f, 2.70553946f, 3.16472292f, 3.69387746f,
           4.03498554f, 4.56413984f, 5.02332354f, 5.36443138f, 4.20116615f, 4.542274f, 5.00145769f, 5.53061247f, 5.87172031f, 6.40087461f, 6.86005831f, 7.20116615f,
           6.31778431f, 6.65889215f, 7.11807585f, 7.64723015f, 7.98833799f, 8.51749229f, 8.97667599f, 9.31778431f, 7.68221569f, 8.02332401f, 8.48250771f, 9.01166153f,
           9.35276985f, 9.88192463f, 10.3411083f, 10.6822157f, 9.79883385f, 10.1399412f, 10.5991249f, 11.1282797f, 11.469388f, 11.9985418f, 12.4577255f, 12.7988338f,
           11.6355686f, 11.976676f, 12.4358597f, 12.9650145f, 13.3061228f, 13.8352766f, 14.2944603f, 14.6355686f, 13.0f, 13.3411083f, 13.800292f, 14.3294458f,
           14.6705542f, 15.199708f, 15.6588917f, 16.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_cubic_asymmetric";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("asymmetric"));
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 1.40625f, 2.0f, 2.5f, 3.0f, 3.59375f, 4.0f, 4.09375f, 2.625f, 3.03125f, 3.625f, 4.125f,
           4.625f, 5.21875f, 5.625f, 5.71875f, 5.0f, 5.40625f, 6.0f, 6.5f, 7.0f, 7.59375f, 8.0f, 8.09375f,
           7.0f, 7.40625f, 8.0f, 8.5f, 9.0f, 9.59375f, 10.0f, 10.09375f, 9.0f, 9.40625f, 10.0f, 10.5f,
           11.0f, 11.59375f, 12.0f, 12.09375f, 11.375f, 11.78125f, 12.375f, 12.875f, 13.375f, 13.96875f, 14.375f, 14.46875f,
           13.0f, 13.40625f, 14.0f, 14.5f, 15.0f, 15.59375f, 16.0f, 16.09375f, 13.375f, 13.78125f, 14.375f, 14.875f,
           15.375f, 15.96875f, 16.375f, 16.46875f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_linear";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,4,4}, {1.0f, 1.25f, 1.75f, 2.0f, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f,
           3.0f, 3.25f, 3.75f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_linear_align_corners";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("align_corners"));
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,4,4}, {1.0f, 1.33333337f, 1.66666663f, 2.0f, 1.66666663f, 2.0f, 2.33333325f, 2.66666675f, 2.33333325f, 2.66666675f, 3.0f, 3.33333325f,
           3.0f, 3.33333325f, 3.66666675f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_nearest";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 3.0f})});
    c.expected = tensor::from<float>({1,1,4,6}, {1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f,
           3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_cubic";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 9, 10})});
    c.expected = tensor::from<float>({1,1,9,10}, {0.455079228f, 0.640579224f, 0.971579194f, 1.42257917f, 1.9073292f, 2.22332931f, 2.7080791f, 3.15907931f, 3.49007916f, 3.67557931f, 1.39437962f, 1.57987964f,
           1.91087961f, 2.36187959f, 2.84662962f, 3.1626296f, 3.64737964f, 4.09837961f, 4.42937946f, 4.61487961f, 2.95130682f, 3.13680696f, 3.46780682f, 3.91880703f,
           4.40355682f, 4.71955681f, 5.20430708f, 5.65530682f, 5.98630714f, 6.17180681f, 5.20525074f, 5.39075089f, 5.72175074f, 6.17275047f, 6.65750074f, 6.97350073f,
           7.45825052f, 7.90925074f, 8.24025059f, 8.42575073f, 6.88975f, 7.07525015f, 7.40625f, 7.85725021f, 8.34200001f, 8.65799999f, 9.14274979f, 9.59375f,
           9.92475033f, 10.1102505f, 8.57424927f, 8.75974941f, 9.09074974f, 9.541749f, 10.0264997f, 10.3424997f, 10.8272495f, 11.2782497f, 11.6092491f, 11.7947493f,
           10.8281927f, 11.0136929f, 11.3446932f, 11.7956934f, 12.2804432f, 12.5964432f, 13.081193f, 13.5321932f, 13.8631935f, 14.0486927f, 12.3851204f, 12.5706205f,
           12.9016199f, 13.3526201f, 13.8373699f, 14.1533699f, 14.6381207f, 15.0891199f, 15.4201202f, 15.6056204f, 13.3244209f, 13.5099211f, 13.8409204f, 14.2919207f,
           14.7766705f, 15.0926704f, 15.5774212f, 16.0284214f, 16.3594208f, 16.54492f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 7, 8})});
    c.expected = tensor::from<float>({1,1,7,8}, {1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f,
           2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f,
           1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 3.0f, 3.0f, 3.0f, 3.0f,
           4.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f,
           3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest_ceil_half_pixel";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("half_pixel"));
    c.node.set("mode", std::string("nearest"));
    c.node.set("nearest_mode", std::string("ceil"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 8, 8})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 5.0f, 6.0f, 6.0f, 7.0f,
           7.0f, 8.0f, 8.0f, 8.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 8.0f, 8.0f,
           9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 12.0f, 12.0f, 9.0f, 10.0f, 10.0f, 11.0f,
           11.0f, 12.0f, 12.0f, 12.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f,
           13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f, 13.0f, 14.0f, 14.0f, 15.0f,
           15.0f, 16.0f, 16.0f, 16.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest_floor_align_corners";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("align_corners"));
    c.node.set("mode", std::string("nearest"));
    c.node.set("nearest_mode", std::string("floor"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 8, 8})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 1.0f, 1.0f, 1.0f, 2.0f,
           2.0f, 3.0f, 3.0f, 4.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f,
           5.0f, 5.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 5.0f, 5.0f, 5.0f, 6.0f,
           6.0f, 7.0f, 7.0f, 8.0f, 9.0f, 9.0f, 9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f,
           9.0f, 9.0f, 9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 13.0f, 13.0f, 13.0f, 14.0f,
           14.0f, 15.0f, 15.0f, 16.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("asymmetric"));
    c.node.set("mode", std::string("nearest"));
    c.node.set("nearest_mode", std::string("round_prefer_ceil"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 8, 8})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 5.0f, 6.0f, 6.0f, 7.0f,
           7.0f, 8.0f, 8.0f, 8.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 8.0f, 8.0f,
           9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 12.0f, 12.0f, 9.0f, 10.0f, 10.0f, 11.0f,
           11.0f, 12.0f, 12.0f, 12.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f,
           13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f, 13.0f, 14.0f, 14.0f, 15.0f,
           15.0f, 16.0f, 16.0f, 16.0f});
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Resize

TEST_CASE("Resize matches every ONNX backend test case (nearest, linear, cubic, all coordinate and nearest modes)") {
  const auto cases = resize_backend_cases();
  CHECK(cases.size() == 23);
  for (const auto& c : cases) check_backend_case<ops::resize, float>(c, 1e-5);
}

TEST_CASE("Resize opset 13 nearest, asymmetric, floor, scales [1,1,2,2] on [1,16,32,32] (Mixed_ops) on a pool of 2 threads") {
  thread_pool pool(2);
  std::vector<float> xs(16 * 32 * 32);
  std::iota(xs.begin(), xs.end(), 0.0f);
  kernel_node kn = op("Resize", 13)
                       .set("mode", std::string("nearest"))
                       .set("coordinate_transformation_mode", std::string("asymmetric"))
                       .set("nearest_mode", std::string("floor"));
  const tensor y = run1<ops::resize>(kn, {{make<float>({1, 16, 32, 32}, xs)}, {}, {make<float>({4}, {1, 1, 2, 2})}}, &pool);
  std::vector<float> want(16 * 64 * 64);
  for (std::size_t c = 0; c < 16; ++c)
    for (std::size_t i = 0; i < 64; ++i)
      for (std::size_t j = 0; j < 64; ++j) want[(c * 64 + i) * 64 + j] = xs[(c * 32 + i / 2) * 32 + j / 2];
  check_tensor<float>(y, {1, 16, 64, 64}, want);
}

// Whole-number upsampling copies each input element k times along the last axis and copies the row above where
// it read the same input row; pieces of rows on two threads start anywhere in that pattern. A non-whole factor on
// the last axis (7 -> 10) takes the general lookup with the same row copies.
TEST_CASE("Resize nearest by whole factors (3 x 3, 2 x 1, 1 x 1) and by 10/7, on a pool of 2 threads") {
  thread_pool pool(2);
  std::vector<float> xs(2 * 3 * 25 * 7);
  std::iota(xs.begin(), xs.end(), 0.0f);
  const tensor x = make<float>({2, 3, 25, 7}, xs);
  kernel_node kn = op("Resize", 13)
                       .set("mode", std::string("nearest"))
                       .set("coordinate_transformation_mode", std::string("asymmetric"))
                       .set("nearest_mode", std::string("floor"));
  for (const auto& [fh, fw] : std::vector<std::pair<float, float>>{{3, 3}, {2, 1}, {1, 1}, {2, 10.0f / 7}}) {
    CAPTURE(fh);
    CAPTURE(fw);
    const tensor y = run1<ops::resize>(kn, {{x}, {}, {make<float>({4}, {1, 1, fh, fw})}}, &pool);
    const auto H = static_cast<std::size_t>(25 * fh), W = static_cast<std::size_t>(std::floor(7 * fw));
    std::vector<float> want(2 * 3 * H * W);
    for (std::size_t c = 0; c < 6; ++c)
      for (std::size_t i = 0; i < H; ++i)
        for (std::size_t j = 0; j < W; ++j)
          want[(c * H + i) * W + j] = xs[(c * 25 + static_cast<std::size_t>(static_cast<double>(i) / fh)) * 7 +
                                         static_cast<std::size_t>(static_cast<double>(j) / static_cast<double>(fw))];
    check_tensor<float>(y, {2, 3, static_cast<std::int64_t>(H), static_cast<std::int64_t>(W)}, want);
  }
}

TEST_CASE("Resize opset 10: nearest takes the floor upsampling and the ceiling downsampling, linear is asymmetric") {
  const tensor x = make<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const tensor up = run1<ops::resize>(op("Resize", 10).set("mode", std::string("nearest")), {{x}, {make<float>({4}, {1, 1, 2, 3})}});
  check_tensor<float>(up, {1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  const tensor x2 = make<float>({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  const tensor down = run1<ops::resize>(op("Resize", 10), {{x2}, {make<float>({4}, {1, 1, 0.6f, 0.6f})}});
  check_tensor<float>(down, {1, 1, 1, 2}, {1, 3});
  const tensor lin = run1<ops::resize>(op("Resize", 10).set("mode", std::string("linear")), {{x2}, {make<float>({4}, {1, 1, 0.6f, 0.6f})}});
  check_tensor<float>(lin, {1, 1, 1, 2}, {1, 2.6666665f});
  const tensor lin_up = run1<ops::resize>(op("Resize", 10).set("mode", std::string("linear")), {{x}, {make<float>({4}, {1, 1, 2, 2})}});
  check_tensor<float>(lin_up, {1, 1, 4, 4}, {1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4});
}

TEST_CASE("Resize opset 11 takes roi and an empty scales tensor with sizes") {
  const tensor x = make<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  kernel_node kn = op("Resize", 11).set("mode", std::string("nearest"));
  const tensor y = run1<ops::resize>(kn, {{x}, {empty_tensor<float>()}, {empty_tensor<float>()}, {make<i64>({4}, {1, 1, 3, 3})}});
  // half_pixel, round_prefer_floor: x_original = (j + 0.5) * 2/3 - 0.5 = -1/6, 0.5, 7/6 -> 0, 0, 1.
  check_tensor<float>(y, {1, 1, 3, 3}, {1, 1, 2, 1, 1, 2, 3, 3, 4});
}

TEST_CASE("Resize linear is N-linear over any number of resized axes") {
  // A function linear in each coordinate is reproduced exactly: f = i + 10 j + 100 k from [2,2,2] to [3,3,3].
  std::vector<float> xs;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) xs.push_back(static_cast<float>(i + 10 * j + 100 * k));
  kernel_node kn = op("Resize", 13).set("mode", std::string("linear")).set("coordinate_transformation_mode", std::string("align_corners"));
  const tensor y = run1<ops::resize>(kn, {{make<float>({2, 2, 2}, xs)}, {}, {}, {make<i64>({3}, {3, 3, 3})}});
  check_tensor<float>(y, {3, 3, 3}, {0, 50, 100, 5, 55, 105, 10, 60, 110, 0.5f, 50.5f, 100.5f, 5.5f, 55.5f, 105.5f, 10.5f,
                                     60.5f, 110.5f, 1, 51, 101, 6, 56, 106, 11, 61, 111});
  // Three axes resized differently (half_pixel): values from the ONNX reference implementation (interpolate_nd).
  std::vector<float> ys;
  for (int v = 0; v < 24; ++v) ys.push_back(static_cast<float>(std::pow(v, 1.5)));
  const tensor z = run1<ops::resize>(op("Resize", 13).set("mode", std::string("linear")),
                                     {{make<float>({2, 3, 4}, ys)}, {}, {}, {make<i64>({3}, {3, 2, 5})}});
  check_tensor<float>(z, {3, 2, 5},
                      {2.f, 3.0815594f, 4.67032f, 6.615042f, 8.527179f, 18.970562f, 21.82273f, 25.2182f, 28.771587f,
                       31.992218f, 24.588459f, 27.05438f, 30.099312f, 33.381645f, 36.401505f, 51.026302f, 54.768238f,
                       59.154728f, 63.670033f, 67.71254f, 47.176918f, 51.027203f, 55.528305f, 60.148247f, 64.27583f,
                       83.08204f, 87.71375f, 93.091255f, 98.56848f, 103.43286f},
                      1e-4, 1e-5);
}

TEST_CASE("Resize 1-D: linear half_pixel by 1.5 and cubic asymmetric by 2, in double") {
  const tensor x = make<double>({4}, {1, 2, 4, 8});
  const tensor lin = run1<ops::resize>(op("Resize", 13).set("mode", std::string("linear")), {{x}, {}, {make<float>({1}, {1.5f})}});
  check_tensor<double>(lin, {6}, {1, 1.5, 2.3333333333333, 3.6666666666667, 6, 8}, 1e-9, 1e-9);
  kernel_node kn = op("Resize", 13).set("mode", std::string("cubic")).set("coordinate_transformation_mode", std::string("asymmetric"));
  const tensor cub = run1<ops::resize>(kn, {{x}, {}, {make<float>({1}, {2.0f})}});
  check_tensor<double>(cub, {8}, {1, 1.3125, 2, 2.71875, 4, 6.1875, 8, 8.375}, 1e-9, 1e-9);
}

TEST_CASE("Resize nearest with tf_crop_and_resize writes the extrapolation value outside the input") {
  std::vector<float> xs(16);
  std::iota(xs.begin(), xs.end(), 0.0f);
  kernel_node kn = op("Resize", 13)
                       .set("mode", std::string("nearest"))
                       .set("coordinate_transformation_mode", std::string("tf_crop_and_resize"))
                       .set("extrapolation_value", -1.0f);
  const tensor y = run1<ops::resize>(kn, {{make<float>({4, 4}, xs)}, {make<float>({4}, {0.5f, -0.5f, 1.5f, 0.5f})}, {}, {make<i64>({2}, {3, 3})}});
  check_tensor<float>(y, {3, 3}, {-1, 4, 5, -1, 12, 13, -1, -1, -1});
}

TEST_CASE("Resize nearest on uint8 and int8, and an identity resize") {
  const tensor u = make<std::uint8_t>({1, 3}, {10, 200, 255});
  const tensor yu = run1<ops::resize>(op("Resize", 13).set("nearest_mode", std::string("floor")).set("coordinate_transformation_mode", std::string("asymmetric")),
                                      {{u}, {}, {make<float>({2}, {1, 2})}});
  check_tensor<std::uint8_t>(yu, {1, 6}, {10, 10, 200, 200, 255, 255});
  const tensor s = make<std::int8_t>({4}, {-128, -1, 5, 127});
  const tensor ys = run1<ops::resize>(op("Resize", 13), {{s}, {}, {}, {make<i64>({1}, {2})}});
  // half_pixel: x_original = (j + 0.5) * 2 - 0.5 = 0.5, 2.5 -> round_prefer_floor 0, 2.
  check_tensor<std::int8_t>(ys, {2}, {-128, 5});
  const tensor f = make<float>({2, 2}, {1, 2, 3, 4});
  check_tensor<float>(run1<ops::resize>(op("Resize", 13).set("mode", std::string("cubic")), {{f}, {}, {make<float>({2}, {1, 1})}}),
                      {2, 2}, {1, 2, 3, 4});
}

TEST_CASE("Resize errors: scales and sizes both or neither, wrong counts, non-positive scales, unknown modes") {
  const tensor x = make<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const kernel_node kn = op("Resize", 13);
  check_fails<ops::resize>(kn, {{x}, {}, {make<float>({4}, {1, 1, 2, 2})}, {make<i64>({4}, {1, 1, 4, 4})}}, "scales and sizes are both given");
  check_fails<ops::resize>(kn, {{x}}, "neither scales nor sizes");
  check_fails<ops::resize>(kn, {{x}, {}, {make<float>({2}, {2, 2})}}, "scales has 2 elements but X has rank 4");
  check_fails<ops::resize>(kn, {{x}, {}, {}, {make<i64>({3}, {1, 2, 2})}}, "sizes has 3 elements");
  check_fails<ops::resize>(kn, {{x}, {}, {make<float>({4}, {1, 1, 0, 2})}}, "scales[2] must be positive");
  check_fails<ops::resize>(kn, {{x}, {}, {}, {make<i64>({4}, {1, 1, -2, 2})}}, "sizes[2] is negative");
  check_fails<ops::resize>(op("Resize", 13).set("coordinate_transformation_mode", std::string("tf_crop_and_resize")),
                           {{x}, {make<float>({2}, {0, 1})}, {}, {make<i64>({4}, {1, 1, 2, 2})}}, "roi has 2 elements");
  check_fails<ops::resize>(op("Resize", 13).set("mode", std::string("bicubic")), {{x}, {}, {make<float>({4}, {1, 1, 2, 2})}},
                           "unknown mode 'bicubic'");
  check_fails<ops::resize>(op("Resize", 13).set("coordinate_transformation_mode", std::string("corners")),
                           {{x}, {}, {make<float>({4}, {1, 1, 2, 2})}}, "unknown coordinate_transformation_mode 'corners'");
  check_fails<ops::resize>(op("Resize", 13).set("nearest_mode", std::string("round")), {{x}, {}, {make<float>({4}, {1, 1, 2, 2})}},
                           "unknown nearest_mode 'round'");
  check_fails<ops::resize>(op("Resize", 10).set("mode", std::string("cubic")), {{x}, {make<float>({4}, {1, 1, 2, 2})}},
                           "unknown mode 'cubic'");
  // Linear on an integer type is not supported (nearest only).
  auto r = run_kernel<ops::resize>(op("Resize", 13).set("mode", std::string("linear")),
                                   {{make<std::uint8_t>({2}, {1, 2})}, {}, {make<float>({1}, {2})}});
  CHECK(r.code() == errc::not_implemented);
}

// ---------------------------------------------------------------------------------------------------------------
// Resize-18/19: axes, keep_aspect_ratio_policy, antialias, half_pixel_symmetric

namespace {
/// The taps (input index, weight) of output coordinate x_original on an axis of `len` elements for linear or cubic
/// antialiased resizing by `scale`, as the ONNX operator describes it: the filter stretched by 1 / scale (when
/// downsampling), normalized, over the nearest input indices (clamped to the edges).
std::vector<std::pair<i64, double>> antialias_taps(double xo, i64 len, double scale, bool cubic, double A = -0.75) {
  const double s = std::min(scale, 1.0);
  const double fl = std::floor(xo), ratio = xo == fl ? 1.0 : xo - fl;
  const double reach = cubic ? 2.0 : 1.0;
  const auto i0 = static_cast<i64>(std::floor(-reach / s) + 1);
  const i64 n = 2 - 2 * i0;
  std::vector<std::pair<i64, double>> t;
  double sum = 0;
  const auto start = static_cast<i64>(std::clamp(std::ceil(xo) - static_cast<double>(n / 2), -static_cast<double>(n / 2),
                                                  static_cast<double>(len - n / 2)));
  for (i64 k = 0; k < n; ++k) {
    const double x = std::fabs(s * (static_cast<double>(i0 + k) - ratio));
    double w = 0;
    if (!cubic) w = std::max(0.0, 1 - x);
    else if (x <= 1) w = (A + 2) * x * x * x - (A + 3) * x * x + 1;
    else if (x < 2) w = A * x * x * x - 5 * A * x * x + 8 * A * x - 4 * A;
    t.emplace_back(std::clamp<i64>(start + k, 0, len - 1), w);
    sum += w;
  }
  for (auto& [i, w] : t) w /= sum;
  return t;
}

/// ONNX 1.22 backend test data of the Resize-19 attributes (test_resize_*), extracted with /usr/bin/python3 and
/// onnx.numpy_helper; an omitted input is {}.
std::vector<backend_case> resize19_backend_cases() {
  std::vector<backend_case> cases;
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_cubic_antialias";
    c.node = op("Resize", 19);
    c.node.set("antialias", std::int64_t{1});
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.600000024f, 0.600000024f})});
    c.expected = tensor::from<float>({1,1,2,2}, {2.51807213f, 4.28588629f, 9.58932877f, 11.3571424f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_linear_antialias";
    c.node = op("Resize", 19);
    c.node.set("antialias", std::int64_t{1});
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.600000024f, 0.600000024f})});
    c.expected = tensor::from<float>({1,1,2,2}, {2.875f, 4.5f, 9.375f, 11.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_cubic_antialias";
    c.node = op("Resize", 19);
    c.node.set("antialias", std::int64_t{1});
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 3, 3})});
    c.expected = tensor::from<float>({1,1,3,3}, {1.77500916f, 3.12000728f, 4.4650054f, 7.15500164f, 8.5f, 9.84499836f, 12.5349941f, 13.8799925f, 15.2249908f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_linear_antialias";
    c.node = op("Resize", 19);
    c.node.set("antialias", std::int64_t{1});
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 3, 3})});
    c.expected = tensor::from<float>({1,1,3,3}, {2.36363626f, 3.590909f, 4.81818199f, 7.27272749f, 8.5f, 9.72727299f, 12.181818f, 13.409091f, 14.636364f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_nearest_not_larger";
    c.node = op("Resize", 19);
    c.node.set("axes", std::vector<std::int64_t>{2, 3});
    c.node.set("keep_aspect_ratio_policy", std::string("not_larger"));
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({2}, {1, 3})});
    c.expected = tensor::from<float>({1,1,1,2}, {1.0f, 3.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_nearest_not_smaller";
    c.node = op("Resize", 19);
    c.node.set("axes", std::vector<std::int64_t>{2, 3});
    c.node.set("keep_aspect_ratio_policy", std::string("not_smaller"));
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({2}, {1, 3})});
    c.expected = tensor::from<float>({1,1,2,3}, {1.0f, 2.0f, 4.0f, 5.0f, 6.0f, 8.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest_not_larger";
    c.node = op("Resize", 19);
    c.node.set("axes", std::vector<std::int64_t>{2, 3});
    c.node.set("keep_aspect_ratio_policy", std::string("not_larger"));
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({2}, {7, 8})});
    c.expected = tensor::from<float>({1,1,7,7}, {1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest_not_smaller";
    c.node = op("Resize", 19);
    c.node.set("axes", std::vector<std::int64_t>{2, 3});
    c.node.set("keep_aspect_ratio_policy", std::string("not_smaller"));
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({2}, {7, 8})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_nearest_axes_2_3";
    c.node = op("Resize", 19);
    c.node.set("axes", std::vector<std::int64_t>{2, 3});
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({2}, {2.0f, 3.0f})});
    c.expected = tensor::from<float>({1,1,4,6}, {1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_nearest_axes_3_2";
    c.node = op("Resize", 19);
    c.node.set("axes", std::vector<std::int64_t>{3, 2});
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({2}, {3.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,4,6}, {1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest_axes_2_3";
    c.node = op("Resize", 19);
    c.node.set("axes", std::vector<std::int64_t>{2, 3});
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({2}, {7, 8})});
    c.expected = tensor::from<float>({1,1,7,8}, {1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest_axes_3_2";
    c.node = op("Resize", 19);
    c.node.set("axes", std::vector<std::int64_t>{3, 2});
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({2}, {8, 7})});
    c.expected = tensor::from<float>({1,1,7,8}, {1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_tf_crop_and_resize_axes_2_3";
    c.node = op("Resize", 19);
    c.node.set("axes", std::vector<std::int64_t>{2, 3});
    c.node.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({tensor::from<float>({4}, {0.400000006f, 0.600000024f, 0.600000024f, 0.800000012f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({2}, {3, 3})});
    c.expected = tensor::from<float>({1,1,3,3}, {7.60000038f, 7.9000001f, 8.19999981f, 8.80000019f, 9.10000038f, 9.40000057f, 10.0f, 10.3000002f, 10.6000004f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_tf_crop_and_resize_axes_3_2";
    c.node = op("Resize", 19);
    c.node.set("axes", std::vector<std::int64_t>{3, 2});
    c.node.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({tensor::from<float>({4}, {0.600000024f, 0.400000006f, 0.800000012f, 0.600000024f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({2}, {3, 3})});
    c.expected = tensor::from<float>({1,1,3,3}, {7.60000038f, 7.9000001f, 8.19999981f, 8.80000019f, 9.10000038f, 9.40000057f, 10.0f, 10.3000002f, 10.6000004f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_linear_half_pixel_symmetric";
    c.node = op("Resize", 19);
    c.node.set("coordinate_transformation_mode", std::string("half_pixel_symmetric"));
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,1,4}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 1.0f, 0.600000024f})});
    c.expected = tensor::from<float>({1,1,1,2}, {1.66666675f, 3.33333325f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_linear_half_pixel_symmetric";
    c.node = op("Resize", 19);
    c.node.set("coordinate_transformation_mode", std::string("half_pixel_symmetric"));
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.29999995f, 2.94000006f})});
    c.expected = tensor::from<float>({1,1,4,5}, {1.0f, 1.15986395f, 1.5f, 1.84013605f, 2.0f, 1.56521738f, 1.72508132f, 2.06521749f, 2.40535355f, 2.56521749f, 2.43478251f, 2.59464645f, 2.93478251f, 3.27491856f, 3.43478251f, 3.0f, 3.15986395f, 3.5f, 3.84013605f, 4.0f});
    cases.push_back(std::move(c));
  }
  return cases;
}
}  // namespace

TEST_CASE("Resize-19 matches the ONNX 1.22 backend cases of axes, keep_aspect_ratio_policy, antialias and half_pixel_symmetric") {
  const auto cases = resize19_backend_cases();
  CHECK(cases.size() == 16);
  for (const auto& c : cases) check_backend_case<ops::resize, float>(c, 1e-5);
}

TEST_CASE("Resize-19 linear antialias: downsampling by 1/2 widens the triangle to 4 taps - upsampling is plain linear") {
  const tensor x = make<float>({8}, {0, 1, 2, 3, 4, 5, 6, 7});
  kernel_node aa = op("Resize", 19).set("mode", std::string("linear")).set("antialias", std::int64_t{1});
  // x_original = 2 j + 0.5: weights 1/8, 3/8, 3/8, 1/8 on indices 2j-1 .. 2j+2 (clamped to the edges).
  check_tensor<float>(run1<ops::resize>(aa, {{x}, {}, {make<float>({1}, {0.5f})}}), {4}, {0.625f, 2.5f, 4.5f, 6.375f});
  // Without antialias (or before opset 18, where the attribute does not exist): 2 taps at x_original.
  const kernel_node plain = op("Resize", 19).set("mode", std::string("linear"));
  check_tensor<float>(run1<ops::resize>(plain, {{x}, {}, {make<float>({1}, {0.5f})}}), {4}, {0.5f, 2.5f, 4.5f, 6.5f});
  kernel_node old = op("Resize", 13).set("mode", std::string("linear")).set("antialias", std::int64_t{1});
  check_tensor<float>(run1<ops::resize>(old, {{x}, {}, {make<float>({1}, {0.5f})}}), {4}, {0.5f, 2.5f, 4.5f, 6.5f});
  // Upsampling: antialias changes nothing.
  const tensor up_aa = run1<ops::resize>(aa, {{x}, {}, {make<float>({1}, {1.5f})}});
  const tensor up = run1<ops::resize>(plain, {{x}, {}, {make<float>({1}, {1.5f})}});
  check_tensor<float>(up_aa, {12}, values_of<float>(up), 1e-6, 1e-6);
}

TEST_CASE("Resize-19 cubic antialias over two axes on a pool of 2 threads matches a direct 2-D sum (double)") {
  thread_pool pool(2);
  lcg rng(19);
  const i64 C = 3, H = 40, W = 37, OH = 13, OW = 17;
  std::vector<double> xs(static_cast<std::size_t>(C * H * W));
  for (auto& v : xs) v = rng.uniform();
  kernel_node kn = op("Resize", 19).set("mode", std::string("cubic")).set("antialias", std::int64_t{1})
                       .set("axes", std::vector<std::int64_t>{-2, -1});
  const tensor y = run1<ops::resize>(kn, {{make<double>({C, H, W}, xs)}, {}, {}, {make<i64>({2}, {OH, OW})}}, &pool);
  const double sh = static_cast<double>(OH) / static_cast<double>(H), sw = static_cast<double>(OW) / static_cast<double>(W);
  std::vector<double> want;
  for (i64 c = 0; c < C; ++c)
    for (i64 i = 0; i < OH; ++i)
      for (i64 j = 0; j < OW; ++j) {
        double v = 0;
        for (const auto& [a, wa] : antialias_taps((static_cast<double>(i) + 0.5) / sh - 0.5, H, sh, true))
          for (const auto& [b, wb] : antialias_taps((static_cast<double>(j) + 0.5) / sw - 0.5, W, sw, true))
            v += wa * wb * xs[static_cast<std::size_t>((c * H + a) * W + b)];
        want.push_back(v);
      }
  check_tensor<double>(y, {C, OH, OW}, want, 1e-12, 1e-12);
}

TEST_CASE("Resize-19 keep_aspect_ratio_policy: one scale for the given axes, rounded half up, used by the coordinates") {
  std::vector<float> xs(15);
  std::iota(xs.begin(), xs.end(), 0.0f);
  const tensor x = make<float>({3, 5}, xs);
  // not_larger: min(4/3, 4/5) = 0.8 -> [round(2.4), round(4)] = [2, 4]; x_original = (j + 0.5) / 0.8 - 0.5.
  kernel_node nl = op("Resize", 19).set("keep_aspect_ratio_policy", std::string("not_larger"));
  check_tensor<float>(run1<ops::resize>(nl, {{x}, {}, {}, {make<i64>({2}, {4, 4})}}), {2, 4}, {0, 1, 3, 4, 5, 6, 8, 9});
  // not_smaller: max(4/3, 4/5) = 4/3 -> [4, round(6.67)] = [4, 7].
  kernel_node ns = op("Resize", 19).set("keep_aspect_ratio_policy", std::string("not_smaller"));
  check_tensor<float>(run1<ops::resize>(ns, {{x}, {}, {}, {make<i64>({2}, {4, 4})}}), {4, 7},
                      {0, 1, 1, 2, 3, 4, 4, 5, 6, 6, 7, 8, 9, 9, 5, 6, 6, 7, 8, 9, 9, 10, 11, 11, 12, 13, 14, 14});
  // With axes, only those take part: [1, 3, 5] with axes [2] and sizes [2] (either policy): scale 0.4, width 2.
  const tensor x3 = make<float>({1, 3, 5}, xs);
  kernel_node ax = op("Resize", 19).set("keep_aspect_ratio_policy", std::string("not_smaller")).set("axes", std::vector<std::int64_t>{2});
  check_tensor<float>(run1<ops::resize>(ax, {{x3}, {}, {}, {make<i64>({1}, {2})}}), {1, 3, 2}, {1, 3, 6, 8, 11, 13});
  // stretch (the default) takes the sizes as they are.
  check_tensor<float>(run1<ops::resize>(op("Resize", 19), {{x}, {}, {}, {make<i64>({2}, {3, 5})}}), {3, 5}, xs);
}

TEST_CASE("Resize-19 axes: negative axes, the other axes untouched, roi only for the given axes") {
  std::vector<float> xs(12);
  std::iota(xs.begin(), xs.end(), 0.0f);
  const tensor x = make<float>({2, 2, 3}, xs);
  // Scales for axis -1 only, nearest asymmetric floor: x_original = j / 2.
  kernel_node kn = op("Resize", 19).set("axes", std::vector<std::int64_t>{-1})
                       .set("coordinate_transformation_mode", std::string("asymmetric")).set("nearest_mode", std::string("floor"));
  check_tensor<float>(run1<ops::resize>(kn, {{x}, {}, {make<float>({1}, {2.0f})}}), {2, 2, 6},
                      {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11});
  // tf_crop_and_resize on axis 1 only (roi [start, end] for it): crop [0.5, 1] of 2 rows -> 1 row at x = 0.75.
  kernel_node crop = op("Resize", 19).set("axes", std::vector<std::int64_t>{1}).set("mode", std::string("linear"))
                         .set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
  check_tensor<float>(run1<ops::resize>(crop, {{x}, {make<float>({2}, {0.5f, 1.0f})}, {}, {make<i64>({1}, {1})}}), {2, 1, 3},
                      {2.25f, 3.25f, 4.25f, 8.25f, 9.25f, 10.25f});
}

TEST_CASE("Resize-19 half_pixel_symmetric: the centres of input and output coincide when the size was rounded") {
  // 5 -> floor(5 * 0.5) = 2: adjustment 2 / 2.5 = 0.8, offset 2.5 * 0.2 = 0.5: x_original = 0.5 + 2 j + 0.5 = 1, 3.
  const tensor x = make<float>({5}, {0, 10, 20, 30, 40});
  kernel_node kn = op("Resize", 19).set("mode", std::string("linear")).set("coordinate_transformation_mode", std::string("half_pixel_symmetric"));
  check_tensor<float>(run1<ops::resize>(kn, {{x}, {}, {make<float>({1}, {0.5f})}}), {2}, {10, 30});
  // half_pixel gives x_original = 0.5, 2.5 instead.
  kernel_node hp = op("Resize", 19).set("mode", std::string("linear"));
  check_tensor<float>(run1<ops::resize>(hp, {{x}, {}, {make<float>({1}, {0.5f})}}), {2}, {5, 25});
  // No rounding (sizes): the same as half_pixel.
  check_tensor<float>(run1<ops::resize>(kn, {{x}, {}, {}, {make<i64>({1}, {2})}}), {2}, {7.5f, 32.5f});
  check_fails<ops::resize>(op("Resize", 18).set("coordinate_transformation_mode", std::string("half_pixel_symmetric")),
                           {{x}, {}, {make<float>({1}, {0.5f})}}, "unknown coordinate_transformation_mode 'half_pixel_symmetric'");
}

TEST_CASE("Resize-19 errors: axes out of range or repeated, counts against the axes, unknown keep_aspect_ratio_policy") {
  const tensor x = make<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  check_fails<ops::resize>(op("Resize", 19).set("axes", std::vector<std::int64_t>{2, 4}), {{x}, {}, {make<float>({2}, {2, 2})}},
                           "axes: axis 4 is out of range");
  check_fails<ops::resize>(op("Resize", 19).set("axes", std::vector<std::int64_t>{3, -1}), {{x}, {}, {make<float>({2}, {2, 2})}},
                           "axes: axis -1 is repeated");
  check_fails<ops::resize>(op("Resize", 19).set("axes", std::vector<std::int64_t>{2, 3}), {{x}, {}, {make<float>({4}, {1, 1, 2, 2})}},
                           "scales has 4 elements; expected the 2 axes = 2");
  check_fails<ops::resize>(op("Resize", 19).set("axes", std::vector<std::int64_t>{2, 3}), {{x}, {}, {}, {make<i64>({1}, {3})}},
                           "sizes has 1 elements; expected the 2 axes = 2");
  check_fails<ops::resize>(op("Resize", 19).set("axes", std::vector<std::int64_t>{3}).set("coordinate_transformation_mode", std::string("tf_crop_and_resize")),
                           {{x}, {make<float>({4}, {0, 0, 1, 1})}, {}, {make<i64>({1}, {3})}}, "roi has 4 elements; expected 2 * the 1 axes = 2");
  check_fails<ops::resize>(op("Resize", 19).set("keep_aspect_ratio_policy", std::string("fit")), {{x}, {}, {}, {make<i64>({4}, {1, 1, 3, 3})}},
                           "unknown keep_aspect_ratio_policy 'fit'");
}
