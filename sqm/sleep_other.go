//go:build !linux

package sqm

// sleeper is the Go timer elsewhere than Linux (sleep_linux.go).
type sleeper struct{ timerSleeper }

func (s *sleeper) init()  { s.timerSleeper.init() }
func (s *sleeper) start() {}
func (s *sleeper) stop()  { s.timerSleeper.stop() }
func (s *sleeper) arm()   {}
func (s *sleeper) wake()  { s.timerSleeper.kick() }
func (s *sleeper) close() {}
