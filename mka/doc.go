// Package mka implements the MACsec Key Agreement protocol (MKA, IEEE Std
// 802.1X-2020 clauses 9 and 11) for one participant in one secure
// connectivity association: it knows frames and keys, not netstack or the
// router's configuration. The caller hands it received EAPOL-MKA frames,
// gives it a [Transport] to send its own, a [Clock], and a [SecY] whose
// SAs it installs; *macsec.SecY satisfies [SecY] as it is.
//
// Clause numbers are from IEEE Std 802.1X-2020 as remembered (the text was
// not available); where the standard leaves a choice open, or where memory
// is unsure, the package does what wpa_supplicant's KaY
// (src/pae/ieee802_1x_kay.c) does, since that is the peer it must work with.
//
// # Keys
//
// A pre-shared [CAK] (16 or 32 octets) and its name (CKN, 1..32 octets)
// identify the connectivity association. From the CAK the participant
// derives the ICK, which authenticates every MKPDU with a 16-octet AES-CMAC
// ICV, and the KEK, which wraps distributed SAKs with AES Key Wrap (RFC
// 3394). Both use the 802.1X KDF (6.2.1): AES-CMAC in counter mode in the
// style of NIST SP 800-108. The key server draws each SAK from a CSPRNG.
// No key ever appears in String, error text, logs or [Participant.State].
//
// # MKPDUs
//
// [Decode] parses an MKPDU into an [MKPDU] whose variable-length fields are
// views into the frame (no allocation); every malformed frame yields a
// [*DecodeError] with a [Reason], so that the caller can count drops by
// cause. [MKPDU.Append] encodes one. [VerifyICV] and the encoder compute the
// ICV over DA, SA, EtherType and the EAPOL packet up to the ICV (9.4.1).
//
// # Participant
//
// [Participant] runs the protocol: a random 96-bit member identifier,
// message numbers with replay protection, potential and live peers, key
// server election, SAK distribution and the RX-first, TX-after handshake
// of the MACsec SAK Use parameter set, rekeying before PN exhaustion and on
// demand, and peer expiry after the MKA Life Time. It is driven from
// outside: [Participant.Receive] for each received frame and
// [Participant.Tick] for the timers ([Participant.Run] ticks on real time).
//
// # Cipher suites
//
// As key server the participant distributes SAKs of [Config.CipherSuite].
// As a member it also takes SAKs of the suites in [Config.CipherSuites]:
// it asks the SecY ([SuiteSwitcher]) to switch suite before it installs
// any SA of such a SAK, forgets the SAs of the old suite and adds the
// receive SCs again; MI, MN and peers stay. A SAK of any other suite, or
// any SAK while MACsec is not desired, is rejected and counted.
package mka
