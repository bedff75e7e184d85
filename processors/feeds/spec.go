package feeds

import (
	"github.com/offerlog/offerlog/streams/component"
)

// Spec is the component this package is, as the platform registers it
// (package component): its name, ports, stores, groups and tables.
var Spec = component.Spec{Name: Group, User: true, Port: 8087, Stores: 3,
	Summary: "loads bulk feeds: matches items to offers, removes what a finished feed left out",
	Groups:  []string{Group}, Flags: []string{"wait-timeout", "view-staleness"}}
