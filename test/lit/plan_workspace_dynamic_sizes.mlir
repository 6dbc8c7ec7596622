// RUN: ember-opt %s --ember-plan-workspace | filecheck %s
// Sizes that torch-mlir's lowering computes in i64 with clamps (a slice of a padded
// image: min/select chains, casts) and sizes read back with memref.dim from a view are
// still size arithmetic: the temporary is planned into the workspace (no malloc), and
// the runtime's expression computes each shared value once (t0, t1, ...).

// CHECK: module attributes {ember.workspace_expr = "t0 = z[0] + -1; t1 = int(t0 < 0); t2 = z[0] + 6; t3 = t0 + t2; t4 = t3 if t1 else t0; t5 = min(t4, t2); t6 = tdiv(t5, 2); return (-(-4*z[1]*t6 // 64) * 64)"}
// CHECK-LABEL: func.func @forward
// CHECK-NOT: memref.alloc
// CHECK: %[[WS:.*]] = memref.reinterpret_cast %arg{{[0-9]+}} to offset: [0], sizes: [%{{.*}}], strides: [1] : memref<i8> to memref<?xi8>
// CHECK: memref.view %[[WS]]
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @forward(%x: memref<f32>, %y: memref<f32>, %s: index, %b: index) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : i64
  %c6 = arith.constant 6 : index
  %cm1 = arith.constant -1 : i64
  %zero = arith.constant 0 : i64
  %xv = memref.reinterpret_cast %x to offset: [0], sizes: [%b, %s], strides: [%s, 1] : memref<f32> to memref<?x?xf32>
  %bdim = memref.dim %xv, %c0 : memref<?x?xf32>
  %padded = arith.addi %s, %c6 : index
  %p64 = arith.index_cast %padded : index to i64
  %s64 = arith.index_cast %s : index to i64
  %end = arith.addi %s64, %cm1 : i64
  %neg = arith.cmpi slt, %end, %zero : i64
  %wrapped = arith.addi %end, %p64 : i64
  %e = arith.select %neg, %wrapped, %end : i64
  %clamped = arith.minsi %e, %p64 : i64
  %half = arith.divsi %clamped, %c2 : i64
  %n = arith.index_cast %half : i64 to index
  %t = memref.alloc(%bdim, %n) : memref<?x?xf32>
  %yv = memref.reinterpret_cast %y to offset: [0], sizes: [%b, %n], strides: [%n, 1] : memref<f32> to memref<?x?xf32>
  memref.copy %t, %yv : memref<?x?xf32> to memref<?x?xf32>
  memref.dealloc %t : memref<?x?xf32>
  return
}
