package lab

import (
	"context"
	"fmt"
	"time"
)

const (
	TestCache = "cache" // RFC 2889 5.7, address caching capacity
	TestLearn = "learn" // RFC 2889 5.8, address learning rate
)

// The RFC 2889 kinds: address caching capacity (5.7) and address learning
// rate (5.8), each once a unit on a learning bridge (methods.go has their
// trials).
type (
	// CacheTest: the most addresses tried is Max.
	CacheTest struct{ Max int }
	// LearnTest: a learning-rate trial teaches Addrs addresses.
	LearnTest struct{ Addrs int }
)

func (CacheTest) Name() string { return TestCache }
func (LearnTest) Name() string { return TestLearn }

func (k CacheTest) Needs(Scenario) Needs {
	return Needs{Learning: true, AllHosts: true, MaxEntries: 2 * k.Max}
}

func (k LearnTest) Needs(Scenario) Needs {
	return Needs{Learning: true, AllHosts: true, MaxEntries: 2 * k.Addrs}
}

func (CacheTest) Estimate(Scenario, Spec) time.Duration { return 60 * time.Second }
func (LearnTest) Estimate(Scenario, Spec) time.Duration { return 60 * time.Second }

func (k CacheTest) Run(ctx context.Context, u *UnitRun) error {
	s := u.S
	u.Status(fmt.Sprintf("address caching, up to %d addresses", k.Max))
	n, err := u.Rig.AddressCaching(ctx, k.Max, 100e3, s.Timing, func(n int, ok bool) {
		u.Status(fmt.Sprintf("address caching: %d addresses %s", n, passWord(ok)))
	})
	if err != nil {
		return err
	}
	r := u.Base
	r.Test, r.Param, r.Value, r.Unit = TestCache, "learned at 100k/s", float64(n), "addresses"
	if n == k.Max {
		r.Note = "held every address tried"
	}
	u.Add(r)
	return nil
}

func (k LearnTest) Run(ctx context.Context, u *UnitRun) error {
	s := u.S
	u.Status(fmt.Sprintf("learning rate, %d addresses", k.Addrs))
	rate, unlimited, err := u.Rig.LearningRate(ctx, k.Addrs, 20e6, s.Timing, func(rate float64, ok bool) {
		u.Status(fmt.Sprintf("learning rate: %s new addresses/s %s", PPSText(rate), passWord(ok)))
	})
	if err != nil {
		return err
	}
	r := u.Base
	r.Test, r.Param, r.Value, r.Unit = TestLearn, fmt.Sprintf("%d addresses", k.Addrs), rate, "addresses/s"
	if unlimited {
		r.Note = "learned every address at the fastest rate the generator offered: the path, not learning, was the limit"
	}
	u.Add(r)
	return nil
}
