// RUN: ember-opt %s --split-input-file --ember-shape-exact-reshapes | filecheck %s
// A tensor.reshape that splits one dim (torch-mlir's unflatten with several run-time
// sizes) becomes an expand_shape with the shape tensor's sizes; one that merges one
// group becomes a collapse_shape; kept dynamic dims are checked at run time.

// CHECK-LABEL: func.func @split_one_dim
// CHECK-NOT: tensor.reshape
// CHECK: %[[N:.*]] = arith.index_cast %arg1 : i64 to index
// CHECK: %[[H:.*]] = arith.index_cast %arg2 : i64 to index
// CHECK: tensor.expand_shape %arg0 {{\[\[}}0], [1, 2, 3]] output_shape [32, %[[N]], %[[H]], %[[H]]] : tensor<32x?xf32> into tensor<32x?x?x?xf32>
func.func @split_one_dim(%x: tensor<32x?xf32>, %n: i64, %h: i64) -> tensor<32x?x?x?xf32> {
  %c32 = arith.constant 32 : i64
  %shape = tensor.from_elements %c32, %n, %h, %h : tensor<4xi64>
  %r = tensor.reshape %x(%shape) : (tensor<32x?xf32>, tensor<4xi64>) -> tensor<32x?x?x?xf32>
  return %r : tensor<32x?x?x?xf32>
}

// -----

// CHECK-LABEL: func.func @merge_with_kept_dynamic_dim
// CHECK: %[[D:.*]] = tensor.dim %arg0, %{{.*}} : tensor<?x4x5xf32>
// CHECK: %[[OK:.*]] = arith.cmpi eq, %[[D]], %{{.*}} : index
// CHECK: cf.assert %[[OK]], "reshape keeps the size of every dim it does not split or merge"
// CHECK: tensor.collapse_shape %arg0 {{\[\[}}0], [1, 2]] : tensor<?x4x5xf32> into tensor<?x20xf32>
func.func @merge_with_kept_dynamic_dim(%x: tensor<?x4x5xf32>, %b: i64) -> tensor<?x20xf32> {
  %c20 = arith.constant 20 : i64
  %shape = tensor.from_elements %b, %c20 : tensor<2xi64>
  %r = tensor.reshape %x(%shape) : (tensor<?x4x5xf32>, tensor<2xi64>) -> tensor<?x20xf32>
  return %r : tensor<?x20xf32>
}

// -----

// Two dims could be the one that splits: the reshape stays.
// CHECK-LABEL: func.func @ambiguous
// CHECK: tensor.reshape
func.func @ambiguous(%x: tensor<?x?xf32>, %a: i64, %b: i64, %c: i64) -> tensor<?x?x?xf32> {
  %shape = tensor.from_elements %a, %b, %c : tensor<3xi64>
  %r = tensor.reshape %x(%shape) : (tensor<?x?xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  return %r : tensor<?x?x?xf32>
}
