package capture

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The control socket's protocol: the client writes one JSON Request and a
// newline; the server answers with records of a type octet, a 32-bit
// big-endian length and that many octets: recData carries pcapng, then
// exactly one recResult (a JSON Result) or recError (a message) ends the
// stream.
const (
	recData   = 'd'
	recResult = 'r'
	recError  = 'e'
	// maxRecord bounds one record, so a broken peer cannot make the
	// client allocate much.
	maxRecord = 1 << 20
	// maxRequest bounds the request line the server reads.
	maxRequest = 4096
)

// recordWriter frames what it is given as recData records.
type recordWriter struct{ w io.Writer }

func writeRecord(w io.Writer, typ byte, b []byte) error {
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(b)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

func (r recordWriter) Write(b []byte) (int, error) {
	for n := 0; n < len(b); {
		c := min(len(b)-n, maxRecord)
		if err := writeRecord(r.w, recData, b[n:n+c]); err != nil {
			return n, err
		}
		n += c
	}
	return len(b), nil
}

// readStream copies recData records from r to out until the final
// record, and returns its Result or error.
func readStream(r io.Reader, out io.Writer) (Result, error) {
	br := bufio.NewReader(r)
	buf := make([]byte, 0, 64<<10)
	for {
		var h [5]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return Result{}, fmt.Errorf("capture: control socket: %w", err)
		}
		n := binary.BigEndian.Uint32(h[1:])
		if n > maxRecord {
			return Result{}, fmt.Errorf("capture: control socket: record of %d octets", n)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		b := buf[:n]
		if _, err := io.ReadFull(br, b); err != nil {
			return Result{}, fmt.Errorf("capture: control socket: %w", err)
		}
		switch h[0] {
		case recData:
			if _, err := out.Write(b); err != nil {
				return Result{}, fmt.Errorf("capture: output: %w", err)
			}
		case recResult:
			var res Result
			if err := json.Unmarshal(b, &res); err != nil {
				return Result{}, fmt.Errorf("capture: control socket: result: %w", err)
			}
			return res, nil
		case recError:
			return Result{}, errors.New(string(b))
		default:
			return Result{}, fmt.Errorf("capture: control socket: record type %#x", h[0])
		}
	}
}
