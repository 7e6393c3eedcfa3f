package mka

// Equal reports whether c and o hold the same key and name; the key is
// compared in constant time. A reload uses it to tell whether a CAK file
// changed without ever printing either key.
func (c CAK) Equal(o CAK) bool {
	return string(c.ckn) == string(o.ckn) && c.key.equal(o.key)
}
