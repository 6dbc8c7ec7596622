// RUN: ember-opt %s --ember-plan-workspace | filecheck %s

// %a and %b are alive together, %c only after %a died: it reuses %a's bytes.
// CHECK: module attributes {ember.workspace_bytes = 8192 : i64}
// CHECK-LABEL: func.func @f
// CHECK-SAME: (%{{.*}}: memref<1024xf32>, %{{.*}}: memref<1024xf32>, %[[WS:.*]]: memref<8192xi8>)
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
// CHECK: %[[A:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[WS]][%[[A]]][] : memref<8192xi8> to memref<1024xf32>
// CHECK: %[[B:.*]] = arith.constant 4096 : index
// CHECK: memref.view %[[WS]][%[[B]]][] : memref<8192xi8> to memref<1024xf32>
// CHECK: %[[C:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[WS]][%[[C]]][] : memref<8192xi8> to memref<1024xf32>
func.func @f(%x: memref<1024xf32>, %y: memref<1024xf32>) {
  %a = memref.alloc() : memref<1024xf32>
  memref.copy %x, %a : memref<1024xf32> to memref<1024xf32>
  %b = memref.alloc() : memref<1024xf32>
  memref.copy %a, %b : memref<1024xf32> to memref<1024xf32>
  memref.dealloc %a : memref<1024xf32>
  %c = memref.alloc() : memref<1024xf32>
  memref.copy %b, %c : memref<1024xf32> to memref<1024xf32>
  memref.dealloc %b : memref<1024xf32>
  memref.copy %c, %y : memref<1024xf32> to memref<1024xf32>
  memref.dealloc %c : memref<1024xf32>
  return
}
