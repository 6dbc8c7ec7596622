// RUN: ember-opt %s --ember-gpu-to-nvvm | filecheck %s

// Static layouts (even a strided view): one pointer per buffer, the layout baked in.
// CHECK: gpu.module @static attributes {ember.bare_pointers = true}
// CHECK: llvm.func @k(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {gpu.kernel
// CHECK: nvvm.read.ptx.sreg.tid.x
// A dynamic size: MLIR's memref descriptors (pointer, pointer, offset, size, stride).
// CHECK: gpu.module @dynamic attributes {ember.bare_pointers = false}
// CHECK: llvm.func @k(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr,
// Math goes to libdevice.
// CHECK: llvm.call @__nv_expf
module attributes {gpu.container_module} {
  gpu.module @static {
    gpu.func @k(%a: memref<4x5xf32, strided<[10, 1], offset: 2>>, %b: memref<4x5xf32>) kernel {
      %t = gpu.thread_id x
      %c5 = arith.constant 5 : index
      %i = arith.divui %t, %c5 : index
      %j = arith.remui %t, %c5 : index
      %x = memref.load %a[%i, %j] : memref<4x5xf32, strided<[10, 1], offset: 2>>
      memref.store %x, %b[%i, %j] : memref<4x5xf32>
      gpu.return
    }
  }
  gpu.module @dynamic {
    gpu.func @k(%a: memref<?xf32>, %b: memref<?xf32>) kernel {
      %t = gpu.thread_id x
      %x = memref.load %a[%t] : memref<?xf32>
      %e = math.exp %x : f32
      memref.store %e, %b[%t] : memref<?xf32>
      gpu.return
    }
  }
}
