package schemas

import (
	"encoding/json"
	"slices"
	"strings"
)

// Avro maps encode in Go's random map order, so tables would not replay
// byte for byte: values that are maps in spirit are sorted lists here,
// with a JSON form of an object.

// Attribute is one attribute of an offer.
type Attribute struct {
	Name  string `avro:"name"`
	Value string `avro:"value"`
}

// Attributes are an offer's attributes, sorted by name (Normalize).
type Attributes []Attribute

// Get returns the value of attribute name, "" if none.
func (a Attributes) Get(name string) string {
	if i, ok := slices.BinarySearchFunc(a, name, func(x Attribute, n string) int { return strings.Compare(x.Name, n) }); ok {
		return a[i].Value
	}
	return ""
}

// AttributesOf returns m as Attributes, sorted.
func AttributesOf(m map[string]string) Attributes {
	out := make(Attributes, 0, len(m))
	for k, v := range m {
		out = append(out, Attribute{Name: k, Value: v})
	}
	slices.SortFunc(out, func(x, y Attribute) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Map returns a as a map.
func (a Attributes) Map() map[string]string {
	m := make(map[string]string, len(a))
	for _, x := range a {
		m[x.Name] = x.Value
	}
	return m
}

// MarshalJSON writes a as an object.
func (a Attributes) MarshalJSON() ([]byte, error) { return json.Marshal(a.Map()) }

// UnmarshalJSON reads an object into sorted attributes.
func (a *Attributes) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*a = AttributesOf(m)
	return nil
}

// Count is a named count.
type Count struct {
	Name  string `avro:"name"`
	Count int64  `avro:"count"`
}

// Counts are named counts in a fixed order: the order names were first
// added, or sorted when built with Set on a sorted list.
type Counts []Count

// Get returns the count of name, 0 if none.
func (c Counts) Get(name string) int64 {
	for _, x := range c {
		if x.Name == name {
			return x.Count
		}
	}
	return 0
}

// Add adds delta to the count of name, appending it if new.
func (c *Counts) Add(name string, delta int64) {
	for i := range *c {
		if (*c)[i].Name == name {
			(*c)[i].Count += delta
			return
		}
	}
	*c = append(*c, Count{Name: name, Count: delta})
}

// Set sets the count of name, inserting it in name order if new.
func (c *Counts) Set(name string, v int64) {
	i, ok := slices.BinarySearchFunc(*c, name, func(x Count, n string) int { return strings.Compare(x.Name, n) })
	if ok {
		(*c)[i].Count = v
		return
	}
	*c = slices.Insert(*c, i, Count{Name: name, Count: v})
}

// MarshalJSON writes c as an object.
func (c Counts) MarshalJSON() ([]byte, error) {
	m := make(map[string]int64, len(c))
	for _, x := range c {
		m[x.Name] = x.Count
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads an object into counts sorted by name.
func (c *Counts) UnmarshalJSON(b []byte) error {
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*c = nil
	for k, v := range m {
		c.Set(k, v)
	}
	return nil
}
