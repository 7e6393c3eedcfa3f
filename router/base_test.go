package router

// natBase is a config with a lan and two wans on one port, which the
// tests extend.
const natBase = `ports:
  - {name: eth0, mtu: 1500}
interfaces:
  - {name: lan, port: eth0, vlan: 1, role: lan, addresses: [192.168.1.1/24, fd00:1::1/64]}
  - {name: wan, port: eth0, vlan: 2, role: wan, mtu: 1492, addresses: [203.0.113.2/24, 2001:db8::2/64]}
  - {name: wan2, port: eth0, vlan: 3, role: wan, addresses: [198.51.100.2/24]}
status:
  listen: [lan:80, "127.0.0.1:8080"]
`
