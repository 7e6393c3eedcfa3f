package lab

import (
	"fmt"
	"net/netip"

	"gopkg.in/yaml.v3"
)

// The MACsec lab (TopologyMACsec): host A — router 1 — MACsec link —
// router 2 — host B. Each router has a port towards its host and port
// msPort towards the other router; the interface "link" on msPort carries
// no address, the SecY "ms1" on it carries the link subnet, and each
// router routes the far host's subnet via the other's ms1 address.

// TopologyMACsec is host A — router 1 — MACsec link — router 2 — host B
// (seed 1): four namespaces, three veth pairs. Router 1 is the router of
// the proofs (its LAN side is "lan", its WAN side is the SecY "ms1");
// router 2 runs in its own namespace with a status listener of its own.
const TopologyMACsec = "macsec"

const (
	msPort   = "ms0"  // both routers: veth of the MACsec link
	msLower  = "link" // both routers: the interface on msPort
	msName   = "ms1"  // both routers: the SecY on msLower
	msCipher = "gcm-aes-128"
	// msSCI1 and msSCI2 are the routers' SCIs (MAC-like || port 1).
	msSCI1 = 0x0200_0000_0001_0001
	msSCI2 = 0x0200_0000_0002_0001
)

var (
	msRouter14 = netip.MustParsePrefix("10.77.3.1/30")
	msRouter16 = netip.MustParsePrefix("fd77:3::1/64")
	msRouter24 = netip.MustParsePrefix("10.77.3.2/30")
	msRouter26 = netip.MustParsePrefix("fd77:3::2/64")
)

// macsecOptions is how the lab's SecYs are set up: by the bench modes,
// which compare ciphers, encryption and no MACsec at all.
type macsecOptions struct {
	cipher  string // e.g. "gcm-aes-128"
	encrypt bool
	off     bool // no SecY: the same two routers joined by a plain link
	// keyFile1 and keyFile2 hold router 1's and router 2's transmit keys
	// (each the other's receive key); pnStore1/2 their PN stores.
	keyFile1, keyFile2 string
	pnStore1, pnStore2 string
	// rekeyFile, if set, is a second key of router 1's transmit SC: router
	// 1 gets transmit SA 1 with it and encoding_sa 1, router 2 receive SA
	// 1 (a key rollover, as MKA would do it).
	rekeyFile string
	// parallel is the SecYs' parallel setting ("" = auto).
	parallel string
	// mka keys both SecYs by MKA from cakFile (one CAK, CKN msCKN)
	// instead of static SAs; router 1 (priority 0) is the key server.
	// mkaRekey, e.g. "10s", makes it roll the SAK that often.
	mka      bool
	cakFile  string
	mkaRekey string
	// driver is both routers' ports[].driver (Options.Driver), e.g.
	// "af_xdp"; "" for the profile's default.
	driver string
}

// msCKN is the lab's MKA CA key name.
const msCKN = "6c61622d6d6b61" // "lab-mka"

type labMKA struct {
	CKN      string `yaml:"ckn"`
	CAKFile  string `yaml:"cak_file"`
	Priority int    `yaml:"priority"`
	Rekey    string `yaml:"rekey,omitempty"`
}

type labMACsecSA struct {
	AN      int    `yaml:"an"`
	PN      uint64 `yaml:"pn,omitempty"`
	KeyID   string `yaml:"key_id"`
	KeyFile string `yaml:"key_file"`
	SSCI    uint32 `yaml:"ssci,omitempty"`
	Salt    string `yaml:"salt,omitempty"`
}

type labMACsecRX struct {
	SCI string        `yaml:"sci"`
	SA  []labMACsecSA `yaml:"sa"`
}

type labMACsec struct {
	Name       string        `yaml:"name"`
	On         string        `yaml:"on"`
	SCI        string        `yaml:"sci"`
	Cipher     string        `yaml:"cipher"`
	Encrypt    string        `yaml:"encrypt"`
	Replay     string        `yaml:"replay"`
	Window     int           `yaml:"window"`
	Validate   string        `yaml:"validate"`
	EncodingSA int           `yaml:"encoding_sa,omitempty"`
	TX         []labMACsecSA `yaml:"tx,omitempty"`
	RX         []labMACsecRX `yaml:"rx,omitempty"`
	MKA        *labMKA       `yaml:"mka,omitempty"`
	Addresses  []string      `yaml:"addresses"`
	PNStore    string        `yaml:"pn_store"`
	Parallel   string        `yaml:"parallel,omitempty"`
}

type msRoute struct {
	To  string `yaml:"to"`
	Via string `yaml:"via"`
}

// labMACsecConfig is a router config of the MACsec lab. It spells out its
// keys rather than embedding labConfig, so it stays the same whatever the
// one-router lab's config gains.
type labMACsecConfig struct {
	Hardware   string         `yaml:"hardware"`
	Ports      []labPort      `yaml:"ports"`
	Interfaces []labInterface `yaml:"interfaces"`
	Routes     []msRoute      `yaml:"routes"`
	MACsec     []labMACsec    `yaml:"macsec,omitempty"`
	Status     labStatus      `yaml:"status"`
}

// macsecRouterConfig returns router n's (1 or 2) config in the MACsec lab.
// Router 1 serves the status page on lan:80 like the one-router lab; both
// serve it on 127.0.0.1:statusPort in their namespace.
func macsecRouterConfig(prefix string, n, statusPort int, o macsecOptions) ([]byte, error) {
	onOff := map[bool]string{true: "on", false: "off"}
	host := labInterface{Name: "lan", Port: lanPort, Addresses: prefixes(lanRouter4, lanRouter6), Role: "lan"}
	me4, me6, peer4, peer6 := msRouter14, msRouter16, msRouter24, msRouter26
	far4, far6 := wanHost4.Masked(), wanHost6.Masked()
	sci, peerSCI := uint64(msSCI1), uint64(msSCI2)
	txKey, rxKey, store := o.keyFile1, o.keyFile2, o.pnStore1
	listen := []string{"lan:80"}
	if n == 2 {
		// A site behind the MACsec link, not the Internet: no NAT and
		// no inbound filtering (the MACsec lab routes between sites).
		host = labInterface{Name: "wan", Port: wanPort, Addresses: prefixes(wanRouter4, wanRouter6), Role: "lan"}
		me4, me6, peer4, peer6 = peer4, peer6, me4, me6
		far4, far6 = lanHost4.Masked(), lanHost6.Masked()
		sci, peerSCI = peerSCI, sci
		txKey, rxKey, store = rxKey, txKey, o.pnStore2
		listen = nil
	}
	listen = append(listen, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(statusPort)).String())
	c := labMACsecConfig{
		Hardware: "generic",
		Ports:    []labPort{{Name: host.Port, Driver: o.driver}, {Name: msPort, Driver: o.driver}},
		Interfaces: []labInterface{
			host,
			{Name: msLower, Port: msPort, Role: "wan"},
		},
		Status: labStatus{Listen: listen},
	}
	dev4, dev6 := peer4.Addr().String(), peer6.Addr().String()
	if o.off {
		// The same routers without MACsec: the link subnet sits on the
		// lower interface itself, which then takes the SecY's place: not
		// a WAN (a SecY never is, router/natrules/rules.go), so router 2 does not
		// drop router 1's new connections as unsolicited inbound.
		c.Interfaces[1].Addresses = prefixes(me4, me6)
		c.Interfaces[1].Role = "lan"
	} else {
		sa := func(key string) []labMACsecSA {
			s := labMACsecSA{AN: 0, PN: 1, KeyID: "01", KeyFile: key}
			if o.cipher == "gcm-aes-xpn-128" || o.cipher == "gcm-aes-xpn-256" {
				s.SSCI, s.Salt = 1, "0123456789abcdef01234567"
			}
			return []labMACsecSA{s}
		}
		rxSA := sa(rxKey)
		if len(rxSA) == 1 && rxSA[0].SSCI != 0 {
			rxSA[0].SSCI = 2 // the peer's
		}
		txSA := sa(txKey)
		if len(txSA) == 1 && txSA[0].SSCI != 0 {
			txSA[0].SSCI = 1
			if n == 2 {
				txSA[0].SSCI, rxSA[0].SSCI = 2, 1
			}
		}
		encSA := 0
		if o.rekeyFile != "" {
			next := labMACsecSA{AN: 1, PN: 1, KeyID: "11", KeyFile: o.rekeyFile}
			if n == 1 {
				next.SSCI, next.Salt = txSA[0].SSCI, txSA[0].Salt
				txSA = append(txSA, next)
				encSA = 1
			} else {
				next.SSCI, next.Salt = rxSA[0].SSCI, rxSA[0].Salt
				rxSA = append(rxSA, next)
			}
		}
		c.MACsec = []labMACsec{{
			Name: msName, On: msLower,
			SCI:        fmt.Sprintf("%016x", sci),
			Cipher:     o.cipher,
			Encrypt:    onOff[o.encrypt],
			Replay:     "on",
			Window:     0,
			Validate:   "strict",
			EncodingSA: encSA,
			TX:         txSA,
			RX:         []labMACsecRX{{SCI: fmt.Sprintf("%016x", peerSCI), SA: rxSA}},
			Addresses:  prefixes(me4, me6),
			PNStore:    store,
			Parallel:   o.parallel,
		}}
		if o.mka {
			k := &labMKA{CKN: msCKN, CAKFile: o.cakFile, Priority: 16 * (n - 1)}
			if n == 1 {
				k.Rekey = o.mkaRekey
			}
			c.MACsec[0].TX, c.MACsec[0].RX, c.MACsec[0].EncodingSA, c.MACsec[0].MKA = nil, nil, 0, k
		}
	}
	c.Routes = []msRoute{{To: far4.String(), Via: dev4}, {To: far6.String(), Via: dev6}}
	b, err := yaml.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("lab: config: %w", err)
	}
	head := fmt.Sprintf("# gvrouter MACsec lab config of router %d, written by gvlab run %s.\n", n, prefix)
	return append([]byte(head), b...), nil
}
