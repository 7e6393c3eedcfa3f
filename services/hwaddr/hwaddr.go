// Package hwaddr is the hardware address of a service's Status: a MAC
// that JSON and the status page show as text, e.g. "02:00:00:00:01:0a",
// where a net.HardwareAddr would encode as base64.
package hwaddr

import "net"

// MAC is a hardware address shown as text. The zero value (nil) is no
// address and encodes as "".
type MAC net.HardwareAddr

// String returns the address as net.HardwareAddr spells it.
func (m MAC) String() string { return net.HardwareAddr(m).String() }

// MarshalText implements encoding.TextMarshaler.
func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; "" is no address.
func (m *MAC) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*m = nil
		return nil
	}
	hw, err := net.ParseMAC(string(b))
	*m = MAC(hw)
	return err
}
