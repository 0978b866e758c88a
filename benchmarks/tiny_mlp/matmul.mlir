// A single f32 GEMM, [128, 256] x [256, 256]: one dispatch.
func.func @matmul(%a: tensor<128x256xf32>, %b: tensor<256x256xf32>) -> tensor<128x256xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<128x256xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<128x256xf32>) -> tensor<128x256xf32>
  %out = linalg.matmul ins(%a, %b : tensor<128x256xf32>, tensor<256x256xf32>)
                       outs(%acc : tensor<128x256xf32>) -> tensor<128x256xf32>
  return %out : tensor<128x256xf32>
}
