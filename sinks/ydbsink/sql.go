package ydbsink

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// CreateSQL returns the statement that creates t if it is missing.
func CreateSQL(t Table) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS `%s` (\n", t.Name)
	for _, c := range t.Columns {
		fmt.Fprintf(&b, "  %s %s,\n", c.Name, c.Type)
	}
	fmt.Fprintf(&b, "  PRIMARY KEY (%s)\n)", strings.Join(t.Key, ", "))
	return b.String()
}

func structType(cols []Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + ": " + c.Type
	}
	return "List<Struct<" + strings.Join(parts, ", ") + ">>"
}

func (t Table) keyColumns() []Column {
	var out []Column
	for _, k := range t.Key {
		for _, c := range t.Columns {
			if c.Name == k {
				out = append(out, c)
			}
		}
	}
	return out
}

// UpsertSQL returns the statement that writes the rows of $rows into t,
// each only over an older version of its row (or a missing one).
func UpsertSQL(t Table) string {
	decl := fmt.Sprintf("DECLARE $rows AS %s;\n", structType(t.Columns))
	if len(t.Version) == 0 {
		return decl + fmt.Sprintf("UPSERT INTO `%s` SELECT * FROM AS_TABLE($rows);", t.Name)
	}
	on := make([]string, len(t.Key))
	for i, k := range t.Key {
		on[i] = fmt.Sprintf("o.%s = n.%s", k, k)
	}
	// o is older than n: lexicographic over the version columns.
	var older []string
	for i, v := range t.Version {
		var eq []string
		for _, w := range t.Version[:i] {
			eq = append(eq, fmt.Sprintf("o.%s = n.%s", w, w))
		}
		older = append(older, "("+strings.Join(append(eq, fmt.Sprintf("o.%s < n.%s", v, v)), " AND ")+")")
	}
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = "n." + c.Name + " AS " + c.Name
	}
	return decl + fmt.Sprintf("UPSERT INTO `%s`\nSELECT %s\nFROM AS_TABLE($rows) AS n\nLEFT JOIN `%s` AS o ON %s\nWHERE o.%s IS NULL OR %s;",
		t.Name, strings.Join(cols, ", "), t.Name, strings.Join(on, " AND "), t.Key[0], strings.Join(older, " OR "))
}

// DeleteSQL returns the statement that deletes the rows whose keys are in
// $keys.
func DeleteSQL(t Table) string {
	return fmt.Sprintf("DECLARE $keys AS %s;\nDELETE FROM `%s` ON SELECT * FROM AS_TABLE($keys);", structType(t.keyColumns()), t.Name)
}

// Newer reports whether row n replaces row o of t under the version rule
// UpsertSQL carries out (o nil: a missing row).
func Newer(t Table, o, n map[string]any) bool {
	if o == nil || len(t.Version) == 0 {
		return true
	}
	for _, v := range t.Version {
		switch c := compare(o[v], n[v]); {
		case c < 0:
			return true
		case c > 0:
			return false
		}
	}
	return false // the same version: a redelivery
}

func compare(a, b any) int {
	switch x := a.(type) {
	case int64:
		y, _ := b.(int64)
		return cmp3(x < y, x > y)
	case int32:
		y, _ := b.(int32)
		return cmp3(x < y, x > y)
	case uint64:
		y, _ := b.(uint64)
		return cmp3(x < y, x > y)
	case time.Time:
		y, _ := b.(time.Time)
		return x.Compare(y)
	case string:
		y, _ := b.(string)
		return strings.Compare(x, y)
	case []byte:
		y, _ := b.([]byte)
		return bytes.Compare(x, y)
	}
	return 0
}

func cmp3(less, more bool) int {
	switch {
	case less:
		return -1
	case more:
		return 1
	}
	return 0
}

// KeyOf returns the primary key of row values in t, as text.
func KeyOf(t Table, values map[string]any) string {
	parts := make([]string, len(t.Key))
	for i, k := range t.Key {
		parts[i] = fmt.Sprint(values[k])
	}
	return strings.Join(parts, "\x00")
}

// Collapse returns, of rows in log order, the last row of every key of each
// table: what a batch must write. Its order is the order of the keys' first
// rows.
func Collapse(tables map[string]Table, rows []Row) []Row {
	last := map[string]int{}
	var order []string
	for i, r := range rows {
		k := r.Table + "\x01" + KeyOf(tables[r.Table], r.Values)
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = i
	}
	out := make([]Row, 0, len(order))
	for _, k := range order {
		out = append(out, rows[last[k]])
	}
	return out
}
