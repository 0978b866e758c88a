// Two f32 linear layers with a ReLU between, weights from a parameter archive
// (--parameters=model=mlp_weights.irpa): [8, 256] -> [8, 512] -> [8, 256].
util.global private @w1 = #flow.parameter.named<"model"::"w1"> : tensor<256x512xf32>
util.global private @w2 = #flow.parameter.named<"model"::"w2"> : tensor<512x256xf32>

func.func @forward(%x: tensor<8x256xf32>) -> tensor<8x256xf32> {
  %w1 = util.global.load @w1 : tensor<256x512xf32>
  %w2 = util.global.load @w2 : tensor<512x256xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x512xf32>
  %a1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8x512xf32>) -> tensor<8x512xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<8x256xf32>, tensor<256x512xf32>)
                     outs(%a1 : tensor<8x512xf32>) -> tensor<8x512xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<8x512xf32>) outs(%e1 : tensor<8x512xf32>) {
  ^bb0(%in: f32, %unused: f32):
    %relu = arith.maximumf %in, %zero : f32
    linalg.yield %relu : f32
  } -> tensor<8x512xf32>
  %e2 = tensor.empty() : tensor<8x256xf32>
  %a2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x256xf32>) -> tensor<8x256xf32>
  %y = linalg.matmul ins(%r, %w2 : tensor<8x512xf32>, tensor<512x256xf32>)
                     outs(%a2 : tensor<8x256xf32>) -> tensor<8x256xf32>
  return %y : tensor<8x256xf32>
}
