package status

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// formatBytes formats n in IEC units: "512 B", "1.50 KiB", "3.20 GiB".
func formatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	v := float64(n) / unit
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		if v < unit {
			return fmt.Sprintf("%.2f %s", v, u)
		}
		v /= unit
	}
	return fmt.Sprintf("%.2f EiB", v)
}

// formatSI formats v with an SI prefix and the given unit: "0 bit/s",
// "999 bit/s", "1.00 Mbit/s".
func formatSI(v float64, unit string) string {
	if v < 1000 {
		return fmt.Sprintf("%.0f %s", v, unit)
	}
	for _, p := range []string{"k", "M", "G", "T"} {
		v /= 1000
		if v < 1000 {
			return fmt.Sprintf("%.2f %s%s", v, p, unit)
		}
	}
	return fmt.Sprintf("%.2f P%s", v, unit)
}

func formatBits(v float64) string { return formatSI(v, "bit/s") }
func formatPPS(v float64) string  { return formatSI(v, "pkt/s") }

// formatCount formats n with thousands separators: "1,234,567".
func formatCount(n uint64) string {
	s := strconv.FormatUint(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// formatUptime formats seconds as "3d 4h 5m 6s", leaving out leading zero
// units.
func formatUptime(sec float64) string {
	d := time.Duration(sec) * time.Second
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h := d / time.Hour
	d -= h * time.Hour
	m := d / time.Minute
	d -= m * time.Minute
	s := d / time.Second
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh %dm %ds", days, h, m, s)
	case h > 0:
		return fmt.Sprintf("%dh %dm %ds", h, m, s)
	case m > 0:
		return fmt.Sprintf("%dm %ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// stateClass maps a state to the CSS class that colours it.
func stateClass(state string) string {
	switch state {
	case "up":
		return "up"
	case "down":
		return "down"
	}
	return "other"
}

// drop is one drop reason and its count, for the page.
type drop struct {
	Reason string
	Count  uint64
}

// dropList returns the non-zero counts of m sorted by reason.
func dropList(m map[string]uint64) []drop {
	var l []drop
	for r, n := range m {
		if n > 0 {
			l = append(l, drop{r, n})
		}
	}
	slices.SortFunc(l, func(a, b drop) int { return strings.Compare(a.Reason, b.Reason) })
	return l
}

// The page's number formats, for tests outside this package that check
// what a browser shows (lab's TestLabBrowser).

// FormatBytes is the page's byte count: "512 B", "1.50 KiB".
func FormatBytes(n uint64) string { return formatBytes(n) }

// FormatBits is the page's bit rate: "999 bit/s", "1.00 Mbit/s".
func FormatBits(v float64) string { return formatBits(v) }

// FormatPPS is the page's packet rate: "12.30 kpkt/s".
func FormatPPS(v float64) string { return formatPPS(v) }

// FormatCount is the page's counter: "1,234,567".
func FormatCount(n uint64) string { return formatCount(n) }
