// RUN: ember-opt %s --ember-gpu-loops-to-launches | filecheck %s

// A 2-d parallel loop becomes one launch over a linearised 1-d grid: 256 threads per
// block, ceildiv(M*N, 256) blocks, the innermost dimension fastest (coalesced).
// CHECK-LABEL: func.func @add
// CHECK-NOT: scf.parallel
// CHECK: %[[TOTAL:.*]] = arith.muli
// CHECK: %[[GRID:.*]] = arith.ceildivui %[[TOTAL]], %[[BLOCK:.*]] : index
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[GRID]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BLOCK]]
// CHECK: %[[LIN:.*]] = arith.addi %{{.*}}, %[[TX]]
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[LIN]], %[[TOTAL]]
// CHECK: scf.if %[[IN]]
// CHECK: %[[J:.*]] = arith.remui %[[LIN]]
// CHECK: %[[I:.*]] = arith.divui %[[LIN]]
// CHECK: memref.load %arg0[%{{.*}}, %{{.*}}]
// CHECK: memref.store
// CHECK: gpu.terminator
func.func @add(%a: memref<?x32xf32>, %b: memref<?x32xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c32) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<?x32xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %b[%i, %j] : memref<?x32xf32>
    scf.reduce
  }
  return
}

// A sequential nest left on the host (a scan) becomes a kernel of one thread.
// CHECK-LABEL: func.func @scan
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %[[ONE:.*]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]]) threads({{.*}}) in ({{.*}} = %[[ONE]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]])
// CHECK-NEXT: scf.for
func.func @scan(%a: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c1 to %c16 step %c1 {
    %p = arith.subi %i, %c1 : index
    %x = memref.load %a[%p] : memref<16xf32>
    %y = memref.load %a[%i] : memref<16xf32>
    %s = arith.addf %x, %y : f32
    memref.store %s, %a[%i] : memref<16xf32>
  }
  return
}
