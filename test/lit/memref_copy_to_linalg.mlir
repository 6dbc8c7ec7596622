// RUN: ember-opt %s --ember-memref-copy-to-linalg | filecheck %s

// CHECK-LABEL: func.func @copy
// CHECK-NOT: memref.copy
// CHECK: linalg.copy {{.*}}ins(%arg0 : memref<4x8xf32, strided<[16, 2]>>) outs(%arg1 : memref<4x8xf32>)
func.func @copy(%a: memref<4x8xf32, strided<[16, 2]>>, %b: memref<4x8xf32>) {
  memref.copy %a, %b : memref<4x8xf32, strided<[16, 2]>> to memref<4x8xf32>
  return
}
