package upnp

import (
	"bytes"
	"encoding/xml"
)

// serverHeader is the SERVER header of SSDP and HTTP answers (UDA 1.1:
// OS/version UPnP/1.1 product/version).
const serverHeader = "Linux UPnP/1.1 gvrouter/1"

// Paths the device description points to.
const (
	descPath    = "/rootDesc.xml"
	ipConnCtl   = "/ctl/IPConn"
	ipConnEvt   = "/evt/IPConn"
	ipConnSCPD  = "/WANIPCn.xml"
	commonCtl   = "/ctl/CommonIfCfg"
	commonEvt   = "/evt/CommonIfCfg"
	commonSCPD  = "/WANCfg.xml"
	serviceIPv1 = "urn:schemas-upnp-org:service:WANIPConnection:1"
)

// Device names the gateway in SSDP and its description.
type Device struct {
	UUID         string // e.g. "5c3c7a2e-0b1d-4c8e-9f00-0123456789ab"; stable across restarts
	FriendlyName string // e.g. "gvrouter"
}

// description returns the IGD v1 device description (UDA 1.1 section
// 2.3, IGD:1 device template): the gateway, its WANDevice and its
// WANConnectionDevice with the WANIPConnection:1 service.
func (d *Device) description() []byte {
	var b bytes.Buffer
	esc := func(s string) string {
		var e bytes.Buffer
		xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	name := esc(d.FriendlyName)
	b.WriteString(`<?xml version="1.0"?>
<root xmlns="urn:schemas-upnp-org:device-1-0"><specVersion><major>1</major><minor>0</minor></specVersion>
<device><deviceType>urn:schemas-upnp-org:device:InternetGatewayDevice:1</deviceType>
<friendlyName>` + name + `</friendlyName><manufacturer>gvrouter</manufacturer><modelName>gvrouter</modelName>
<UDN>uuid:` + esc(d.UUID) + `</UDN>
<deviceList><device><deviceType>urn:schemas-upnp-org:device:WANDevice:1</deviceType>
<friendlyName>WANDevice</friendlyName><manufacturer>gvrouter</manufacturer><modelName>gvrouter</modelName>
<UDN>uuid:` + esc(d.UUID) + `-wan</UDN>
<serviceList><service><serviceType>urn:schemas-upnp-org:service:WANCommonInterfaceConfig:1</serviceType>
<serviceId>urn:upnp-org:serviceId:WANCommonIFC1</serviceId><SCPDURL>` + commonSCPD + `</SCPDURL>
<controlURL>` + commonCtl + `</controlURL><eventSubURL>` + commonEvt + `</eventSubURL></service></serviceList>
<deviceList><device><deviceType>urn:schemas-upnp-org:device:WANConnectionDevice:1</deviceType>
<friendlyName>WANConnectionDevice</friendlyName><manufacturer>gvrouter</manufacturer><modelName>gvrouter</modelName>
<UDN>uuid:` + esc(d.UUID) + `-wanconn</UDN>
<serviceList><service><serviceType>` + serviceIPv1 + `</serviceType>
<serviceId>urn:upnp-org:serviceId:WANIPConn1</serviceId><SCPDURL>` + ipConnSCPD + `</SCPDURL>
<controlURL>` + ipConnCtl + `</controlURL><eventSubURL>` + ipConnEvt + `</eventSubURL></service></serviceList>
</device></deviceList></device></deviceList></device></root>
`)
	return b.Bytes()
}
