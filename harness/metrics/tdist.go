package metrics

import "math"

// TCritical95 is Student's t two-sided 95% critical value t_{0.975, df}:
// P(|T| ≤ t) = 0.95. It solves I_x(df/2, 1/2) = 0.05 for x by bisection,
// where P(|T| > t) = I_{df/(df+t²)}(df/2, 1/2) and I is the regularized
// incomplete beta function, then returns t = √(df·(1−x)/x). NaN for df < 1.
func TCritical95(df int) float64 {
	if df < 1 {
		return math.NaN()
	}
	a := float64(df) / 2
	lo, hi := 0.0, 1.0
	for range 200 { // far more halvings than float64 has bits
		mid := (lo + hi) / 2
		if mid == lo || mid == hi {
			break
		}
		if regIncBeta(a, 0.5, mid) < 0.05 {
			lo = mid
		} else {
			hi = mid
		}
	}
	x := (lo + hi) / 2
	return math.Sqrt(float64(df) * (1 - x) / x)
}

// regIncBeta is I_x(a, b) by its continued fraction (Lentz's method), using
// the symmetry I_x(a, b) = 1 − I_{1−x}(b, a) where the fraction converges
// slowly.
func regIncBeta(a, b, x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaFraction(a, b, x) / a
	}
	return 1 - front*betaFraction(b, a, 1-x)/b
}

func betaFraction(a, b, x float64) float64 {
	const tiny = 1e-300
	clamp := func(v float64) float64 {
		if math.Abs(v) < tiny {
			return tiny
		}
		return v
	}
	c, d := 1.0, 1/clamp(1-(a+b)*x/(a+1))
	h := d
	for m := 1.0; m <= 10000; m++ {
		even := m * (b - m) * x / ((a + 2*m - 1) * (a + 2*m))
		d = 1 / clamp(1+even*d)
		c = clamp(1 + even/c)
		h *= d * c
		odd := -(a + m) * (a + b + m) * x / ((a + 2*m) * (a + 2*m + 1))
		d = 1 / clamp(1+odd*d)
		c = clamp(1 + odd/c)
		step := d * c
		h *= step
		if math.Abs(step-1) < 1e-16 {
			break
		}
	}
	return h
}
