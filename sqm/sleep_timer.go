package sqm

import "time"

// timerSleeper waits on a Go timer and a wake channel: the sleeper of
// systems other than Linux, and Linux's when it has no eventfd.
type timerSleeper struct {
	wakeC chan struct{}
	t     *time.Timer
}

func (s *timerSleeper) init() {
	s.wakeC = make(chan struct{}, 1)
	s.t = time.NewTimer(time.Hour)
	s.t.Stop()
}

func (s *timerSleeper) kick() {
	select {
	case s.wakeC <- struct{}{}:
	default:
	}
}

func (s *timerSleeper) sleep(d int64) {
	if d < 0 {
		<-s.wakeC
		return
	}
	s.t.Reset(time.Duration(d))
	select {
	case <-s.t.C:
	case <-s.wakeC:
		s.t.Stop()
	}
}

func (s *timerSleeper) stop() { s.t.Stop() }
