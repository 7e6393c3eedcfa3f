package sqm

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// shaperNice is the nice value of a Queue's thread: above the default, so
// a wake-up at the shaper's deadline preempts ordinary work on a busy
// machine (the lab saw Go's timer wake the goroutine up to 98 ms late
// with two busy loops on two cores). Without CAP_SYS_NICE it stays 0.
const shaperNice = -10

// sleeper is how a Queue's goroutine waits for its next deadline or an
// arrival. On Linux the goroutine keeps its own thread, at shaperNice,
// and sleeps in ppoll on an eventfd with the deadline as its timeout, so
// the kernel's high-resolution timer wakes that thread itself, as cake's
// qdisc watchdog (an hrtimer) does, instead of a Go timer that another,
// ordinary thread must notice first.
type sleeper struct {
	fd int // eventfd; -1: the timer fallback
	// fdMu guards closed: a kick racing Close must not write to a
	// closed (and perhaps reused) descriptor.
	fdMu   sync.RWMutex
	closed bool
	// asleep is set by the goroutine before it looks at the queue; a
	// kick that clears it writes the eventfd, one write per sleep.
	asleep atomic.Bool
	fds    [1]unix.PollFd
	ts     unix.Timespec
	buf    [8]byte
	one    [8]byte
	timer  timerSleeper
}

func (s *sleeper) init() {
	s.fd = -1
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		s.timer.init()
		return
	}
	s.fd = fd
	s.fds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	binary.NativeEndian.PutUint64(s.one[:], 1)
}

// start runs on the goroutine before its loop.
func (s *sleeper) start() {
	if s.fd < 0 {
		return
	}
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), shaperNice)
}

// stop runs on the goroutine as it ends.
func (s *sleeper) stop() {
	if s.fd < 0 {
		s.timer.stop()
	}
	// With the thread locked, the goroutine's end ends the thread and its
	// raised priority with it: no other goroutine runs at shaperNice.
}

// close releases the eventfd once the goroutine has ended.
func (s *sleeper) close() {
	if s.fd < 0 {
		return
	}
	s.fdMu.Lock()
	defer s.fdMu.Unlock()
	if !s.closed {
		s.closed = true
		unix.Close(s.fd)
	}
}

// write adds 1 to the eventfd unless it is closed.
func (s *sleeper) write() {
	s.fdMu.RLock()
	if !s.closed {
		unix.Write(s.fd, s.one[:])
	}
	s.fdMu.RUnlock()
}

// arm marks the goroutine as about to look at the queue: kicks from
// here on wake its next sleep.
func (s *sleeper) arm() {
	if s.fd < 0 {
		return
	}
	s.asleep.Store(true)
}

// kick wakes the goroutine if it is asleep or about to sleep.
func (s *sleeper) kick() {
	if s.fd < 0 {
		s.timer.kick()
		return
	}
	if s.asleep.Swap(false) {
		s.write()
	}
}

// wake wakes the goroutine whatever it is doing (Close).
func (s *sleeper) wake() {
	if s.fd < 0 {
		s.timer.kick()
		return
	}
	s.write()
}

// sleep waits until d ns have passed (d < 0: until a kick) or a kick
// came since arm.
func (s *sleeper) sleep(d int64) {
	if s.fd < 0 {
		s.timer.sleep(d)
		return
	}
	tp := &s.ts
	if d < 0 {
		tp = nil
	} else {
		s.ts = unix.NsecToTimespec(d)
	}
	s.fds[0].Revents = 0
	if n, _ := unix.Ppoll(s.fds[:], tp, nil); n > 0 {
		unix.Read(s.fd, s.buf[:])
	}
	s.asleep.Store(false)
}
