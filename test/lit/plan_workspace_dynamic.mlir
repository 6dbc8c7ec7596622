// RUN: ember-opt %s --ember-plan-workspace | filecheck %s
// Dynamic shapes: byte sizes are expressions of the size argument %s; %a dies at its
// last use (the deallocs are all at the end, as the deallocation pipeline leaves them),
// so %c shares %a's slot. The runtime sizes the workspace with the same formula.

// CHECK: module attributes {ember.workspace_expr = "return (-(-max(16*z[0], 8*z[0]) // 64) * 64) + (-(-16*z[0] // 64) * 64)"}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[S:arg[0-9]+]]: index, %[[WS:arg[0-9]+]]: memref<i8>)
// CHECK-NOT: memref.alloc
// CHECK: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK: %[[A:.*]] = arith.muli %{{.*}}, %[[S]] : index
// CHECK: %[[C:.*]] = arith.muli %{{.*}}, %[[S]] : index
// CHECK: %[[SLOT0:.*]] = arith.maxui %[[A]], %[[C]] : index
// CHECK: %[[END0:.*]] = arith.addi %[[ZERO]], %{{.*}} : index
// CHECK: %[[TOTAL:.*]] = arith.addi %[[END0]], %{{.*}} : index
// CHECK: %[[BYTES:.*]] = memref.reinterpret_cast %[[WS]] to offset: [0], sizes: [%[[TOTAL]]], strides: [1] : memref<i8> to memref<?xi8>
// CHECK: %[[PA:.*]] = memref.view %[[BYTES]][%[[ZERO]]][] : memref<?xi8> to memref<f32>
// CHECK: memref.reinterpret_cast %[[PA]] to offset: [0], sizes: [%[[S]], 4], strides: [4, 1]
// CHECK: %[[PB:.*]] = memref.view %[[BYTES]][%[[END0]]][] : memref<?xi8> to memref<f32>
// CHECK: %[[PC:.*]] = memref.view %[[BYTES]][%[[ZERO]]][] : memref<?xi8> to memref<f32>
// CHECK: memref.reinterpret_cast %[[PC]] to offset: [0], sizes: [%[[S]], 2], strides: [2, 1]
// CHECK-NOT: memref.dealloc
// CHECK: return
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%x: memref<f32>, %y: memref<f32>, %s: index) {
  %xv = memref.reinterpret_cast %x to offset: [0], sizes: [%s, 4], strides: [4, 1] : memref<f32> to memref<?x4xf32>
  %yv = memref.reinterpret_cast %y to offset: [0], sizes: [%s, 2], strides: [2, 1] : memref<f32> to memref<?x2xf32>
  %a = memref.alloc(%s) : memref<?x4xf32>
  memref.copy %xv, %a : memref<?x4xf32> to memref<?x4xf32>
  %b = memref.alloc(%s) : memref<?x4xf32>
  memref.copy %a, %b : memref<?x4xf32> to memref<?x4xf32>
  %c = memref.alloc(%s) : memref<?x2xf32>
  %bs = memref.subview %b[0, 0] [%s, 2] [1, 1] : memref<?x4xf32> to memref<?x2xf32, strided<[4, 1]>>
  memref.copy %bs, %c : memref<?x2xf32, strided<[4, 1]>> to memref<?x2xf32>
  memref.copy %c, %yv : memref<?x2xf32> to memref<?x2xf32>
  memref.dealloc %a : memref<?x4xf32>
  memref.dealloc %b : memref<?x4xf32>
  memref.dealloc %c : memref<?x2xf32>
  return
}
