// Package learn is the lab's learning rate kind: RFC 2889 5.8.
package learn

import (
	"context"
	"fmt"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestCache) }

// Kind is RFC 2889's address learning rate (5.8), once a unit on a
// learning bridge (methods.go has its trials): a trial teaches Addrs
// addresses.
type Kind struct{ Addrs int }

func (Kind) Name() string { return lab.TestLearn }

func (k Kind) Needs(lab.Scenario) lab.Needs {
	return lab.Needs{Learning: true, AllHosts: true, MaxEntries: 2 * k.Addrs}
}

func (Kind) Estimate(lab.Scenario, lab.Spec) time.Duration { return 60 * time.Second }

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	s := u.S
	u.Status(fmt.Sprintf("learning rate, %d addresses", k.Addrs))
	rate, unlimited, err := u.Rig.LearningRate(ctx, k.Addrs, 20e6, s.Timing, func(rate float64, ok bool) {
		u.Status(fmt.Sprintf("learning rate: %s new addresses/s %s", lab.PPSText(rate), lab.PassWord(ok)))
	})
	if err != nil {
		return err
	}
	r := u.Base
	r.Test, r.Param, r.Value, r.Unit = lab.TestLearn, fmt.Sprintf("%d addresses", k.Addrs), rate, "addresses/s"
	if unlimited {
		r.Note = "learned every address at the fastest rate the generator offered: the path, not learning, was the limit"
	}
	u.Add(r)
	return nil
}
