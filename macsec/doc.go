// Package macsec implements an IEEE 802.1AE MACsec SecY on byte slices:
// it knows frames, not netstack. A link endpoint feeds it frames (starting
// at the destination MAC address, no FCS) and gets protected or verified
// frames back, in order, through two callbacks.
//
// Clause numbers cited in this package are from IEEE Std 802.1AE-2018
// (and 802.1AEbw-2013 for XPN) as remembered, not checked against the
// text; bit values and processing order follow Linux drivers/net/macsec.c
// (see shared notes/macsec-spec.md).
//
// # SecY, SCs and SAs
//
// [New] builds a [SecY] from a [Config] whose fields use the words of
// `ip link add ... type macsec` (cipher, encrypt, protect, send_sci,
// end_station, scb, replay, window, validate). A SecY has one transmit
// SC with SAs by association number 0..3 ([SecY.InstallTXSA],
// [SecY.SetEncodingSA]) and any number of receive SCs ([SecY.AddRXSC])
// with SAs by AN ([SecY.InstallRXSA]). All four GCM suites are supported:
// GCM-AES-128/256 (IV = SCI || PN) and GCM-AES-XPN-128/256 (IV = (SSCI ||
// PN64) XOR salt; the receiver recovers the 64-bit PN from the SA's
// nextPN as Linux does). The ICV is always 16 octets and the
// confidentiality offset 0. Keys are [Key] values, which never print,
// marshal or log their bytes.
//
// # Wire format
//
// [SecTAG] is a byte-slice view of the SecTAG with [SecTAGFields] and
// [SecTAG.Encode]; [ParseFrame] applies the receiver's validity checks
// (802.1AE 9.12) and locates the Secure Data and the ICV. The sender sets
// SL exactly for Secure Data shorter than 48 octets; the receiver uses SL
// to find the ICV and ignores any padding after it.
//
// # Ordered parallel crypto
//
// [SecY.Protect] and [SecY.Verify] keep order the way wireguard-go's
// device/send.go and device/receive.go do (numbering under one lock, the
// crypto in parallel, delivery in order; steps at the top of tx.go and
// rx.go), but without queueing every batch to other goroutines. A call
// works in chunks of up to 128 frames: it numbers them (transmit: PNs
// under the transmit lock, which also hands out a delivery ticket, so
// ticket order is PN order; whoever seals a frame writes its SecTAG) or classifies them (receive:
// SecTAG, SC, SA, PN recovery, replay pre-check), offers the chunk to the
// Config.Workers-1 helper goroutines and claims runs of frames itself
// while helpers claim the rest. The caller starts at once and helpers
// join as they wake; up to 16 chunks are in flight. The caller delivers
// each chunk, in ticket order, once its crypto is done: PNs on the wire
// strictly increase per SA (a peer with replay window 0 accepts
// everything), and on receive the replay check and the nextPN update
// happen there, after ICV verification, in order.
//
// Waking a helper costs a wakeup of an idle core, which on a VM can take
// longer than a port's batch of crypto; by default a call wakes helpers
// only when its crypto outweighs the measured wakeup (help.go), and
// [Config].AlwaysParallel shares every batch worth splitting. A helper
// that joined such a call polls for the next one for as long as a wakeup
// takes before it parks, so that under load calls find it awake.
//
// With a single worker ([Config].Workers = 1) the caller numbers, seals
// and delivers its frames frame by frame under one transmit lock, and
// opens, checks and delivers them under one receive lock: no goroutine,
// channel or pool is involved (BenchmarkRatioVsBare).
//
// Protect and Verify return only when all their frames were handed to
// the callbacks ([Config.TX], [Config.RX]) or dropped, so the caller's
// frames (ring memory, say) need only live for the call and nothing is
// copied that need not be: Verify verifies, decrypts and strips in place;
// Protect encrypts straight from the caller's frame into pooled storage
// (integrity-only frames are copied once, by whoever seals them);
// [SecY.ProtectInPlace] builds the protected frame inside the caller's
// buffer, given [Headroom] and [Tailroom], with no copy at all.
// Containers, frame storage and scratch are pooled; the steady state
// allocates nothing per frame. The callbacks run on the calling goroutine
// and must not call the same SecY's Protect (TX) or Verify (RX).
//
// # Counters
//
// Every 802.1AE MIB counter is kept per SecY ([SecYStats]), transmit SC
// ([TXSCStats]), receive SC ([RXSCStats]) and SA ([TXSAStats],
// [RXSAStats]) as atomics; a few non-MIB counters are marked as such.
// [SecY.WorkerFrames] shows how crypto was spread over the workers. The
// data path never logs per frame and never returns errors: it drops and
// counts.
//
// # Packet numbers
//
// A transmit SA stops after its last PN (2^32-1, or 2^64-1 for XPN):
// later frames are dropped and counted in OutPktsPNExhausted, and the
// exhaustion is logged once. With a [PNStore] ([FileStore] writes and
// fsyncs a small file per SA), PNs are reserved in blocks of
// [Config].PNBlock: the high-water mark is durable before any PN below it
// is used, the next block is reserved in the background when half of the
// current one is used, and an SA starts above the stored mark. An SA whose
// state cannot be read or written is not installed.
package macsec
