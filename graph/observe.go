package graph

import (
	"context"
	"slices"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"seckill/graph/generated"
	"seckill/internal/obs"
)

// Operation labels besides the schema's root fields.
const (
	opIntrospection = "introspection" // only __schema, __type or __typename
	opMultiple      = "multiple"      // several root fields
)

// OperationLabels lists every name this package reports to
// obs.SetOperation: the root fields of the schema (Query, Mutation and
// Subscription), "introspection" and "multiple". Metrics use it as their
// allowlist, so a label never takes a value a client made up.
var OperationLabels = sync.OnceValue(func() []string {
	s := generated.NewExecutableSchema(generated.Config{}).Schema()
	out := []string{opIntrospection, opMultiple}
	for _, def := range []*ast.Definition{s.Query, s.Mutation, s.Subscription} {
		if def == nil {
			continue
		}
		for _, f := range def.Fields {
			if !isIntrospection(f.Name) {
				out = append(out, f.Name)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
})

// operationLabel names an operation by what it asks for: its root field
// (the field's name, never its alias), not the client's operation name.
func operationLabel(op *ast.OperationDefinition) string {
	if op == nil {
		return ""
	}
	name := ""
	for _, sel := range op.SelectionSet {
		f, ok := sel.(*ast.Field)
		if !ok {
			return opMultiple // a fragment at the root
		}
		n := f.Name
		if isIntrospection(n) {
			n = opIntrospection
		}
		switch {
		case name == "":
			name = n
		case name != n:
			return opMultiple
		}
	}
	return name
}

func isIntrospection(field string) bool { return len(field) >= 2 && field[:2] == "__" }

// operationNamer reports every operation gqlgen runs to obs (metrics and
// the request's span). The purchase fast path names its purchases itself
// (fastPathHonours).
type operationNamer struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
} = operationNamer{}

func (operationNamer) ExtensionName() string { return "OperationNamer" }

func (operationNamer) Validate(graphql.ExecutableSchema) error { return nil }

func (operationNamer) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	obs.SetOperation(ctx, operationLabel(graphql.GetOperationContext(ctx).Operation))
	return next(ctx)
}
