// RUN: ember-opt %s --ember-approximate-math | filecheck %s

// f32 exp becomes arith: range reduction (floor), polynomial (fma), 2^n from bits.
// CHECK-LABEL: func.func @exp_f32
// CHECK-NOT: math.exp
// CHECK: math.floor
// CHECK: math.fma
// CHECK: arith.bitcast {{.*}} : i32 to f32
// CHECK: arith.cmpf uno
// CHECK: return
func.func @exp_f32(%x: f32) -> f32 {
  %y = math.exp %x : f32
  return %y : f32
}

// Vectors too (splat constants), erf and tanh as rationals (one divf each).
// CHECK-LABEL: func.func @erf_tanh_vector
// CHECK-NOT: math.erf
// CHECK-NOT: math.tanh
// CHECK: arith.constant dense<{{.*}}> : vector<8xf32>
// CHECK: arith.divf {{.*}} : vector<8xf32>
// CHECK: arith.divf {{.*}} : vector<8xf32>
func.func @erf_tanh_vector(%x: vector<8xf32>) -> vector<8xf32> {
  %e = math.erf %x : vector<8xf32>
  %t = math.tanh %e : vector<8xf32>
  return %t : vector<8xf32>
}

// f64 keeps libm precision.
// CHECK-LABEL: func.func @exp_f64
// CHECK: math.exp {{.*}} : f64
func.func @exp_f64(%x: f64) -> f64 {
  %y = math.exp %x : f64
  return %y : f64
}
