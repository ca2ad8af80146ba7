package lab

import (
	"context"
	"fmt"
	"time"
)

// The RFC 2889 kinds: address caching capacity (5.7) and address learning
// rate (5.8), each once a unit on a learning bridge (methods.go has their
// trials).
type (
	cacheKind struct{}
	learnKind struct{}
)

func (cacheKind) Name() string { return TestCache }
func (learnKind) Name() string { return TestLearn }

func (cacheKind) Needs(s Scenario) Needs {
	return Needs{Learning: true, AllHosts: true, MaxEntries: 2 * s.CacheMax}
}

func (learnKind) Needs(s Scenario) Needs {
	return Needs{Learning: true, AllHosts: true, MaxEntries: 2 * s.LearnAddrs}
}

func (cacheKind) Estimate(Scenario, Spec) time.Duration { return 60 * time.Second }
func (learnKind) Estimate(Scenario, Spec) time.Duration { return 60 * time.Second }

func (cacheKind) Run(ctx context.Context, u *UnitRun) error {
	s := u.S
	u.Status(fmt.Sprintf("address caching, up to %d addresses", s.CacheMax))
	n, err := u.Rig.AddressCaching(ctx, s.CacheMax, 100e3, s.Timing, func(n int, ok bool) {
		u.Status(fmt.Sprintf("address caching: %d addresses %s", n, passWord(ok)))
	})
	if err != nil {
		return err
	}
	r := u.Base
	r.Test, r.Param, r.Value, r.Unit = TestCache, "learned at 100k/s", float64(n), "addresses"
	if n == s.CacheMax {
		r.Note = "held every address tried"
	}
	u.Add(r)
	return nil
}

func (learnKind) Run(ctx context.Context, u *UnitRun) error {
	s := u.S
	u.Status(fmt.Sprintf("learning rate, %d addresses", s.LearnAddrs))
	rate, unlimited, err := u.Rig.LearningRate(ctx, s.LearnAddrs, 20e6, s.Timing, func(rate float64, ok bool) {
		u.Status(fmt.Sprintf("learning rate: %s new addresses/s %s", pps(rate), passWord(ok)))
	})
	if err != nil {
		return err
	}
	r := u.Base
	r.Test, r.Param, r.Value, r.Unit = TestLearn, fmt.Sprintf("%d addresses", s.LearnAddrs), rate, "addresses/s"
	if unlimited {
		r.Note = "learned every address at the fastest rate the generator offered: the path, not learning, was the limit"
	}
	u.Add(r)
	return nil
}
