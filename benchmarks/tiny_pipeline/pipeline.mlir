// An end-to-end pipeline across modules: calls @double of the scale module (loaded
// first with --module, from the benchmark file's "modules"), then a GEMM of the result.
module @pipeline {
  func.func private @scale.double(tensor<256x256xf32>) -> tensor<256x256xf32>

  func.func @run(%x: tensor<256x256xf32>) -> tensor<256x256xf32> {
    %y = call @scale.double(%x) : (tensor<256x256xf32>) -> tensor<256x256xf32>
    %zero = arith.constant 0.0 : f32
    %empty = tensor.empty() : tensor<256x256xf32>
    %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<256x256xf32>) -> tensor<256x256xf32>
    %z = linalg.matmul ins(%y, %x : tensor<256x256xf32>, tensor<256x256xf32>)
                       outs(%acc : tensor<256x256xf32>) -> tensor<256x256xf32>
    return %z : tensor<256x256xf32>
  }
}
