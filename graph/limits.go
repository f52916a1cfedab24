package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// operationLimits refuses, before anything runs, an operation that nests
// deeper than maxDepth, or that asks for __schema or __type when
// introspection is off. Both are validation failures (HTTP 422), like the
// rest of what is wrong with a document.
//
// Introspection fields count as depth 1: gqlparser's MaxIntrospectionDepth
// rule already bounds their nesting, and GraphiQL's own introspection
// query nests ofType far deeper than any data query needs.
type operationLimits struct {
	maxDepth      int
	introspection bool
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = operationLimits{}

func (operationLimits) ExtensionName() string { return "OperationLimits" }

func (operationLimits) Validate(graphql.ExecutableSchema) error { return nil }

func (l operationLimits) MutateOperationContext(_ context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	w := depthWalker{fragments: map[string]int{}}
	depth := w.selections(opCtx.Operation.SelectionSet)
	if w.introspects && !l.introspection {
		return validationError("introspection is disabled")
	}
	if depth > l.maxDepth {
		return validationError("operation has depth %d, which exceeds the limit of %d", depth, l.maxDepth)
	}
	return nil
}

func validationError(format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	errcode.Set(err, errcode.ValidationFailed)
	return err
}

// depthWalker measures selection sets. It measures each fragment once, so
// a document that spreads the same fragment everywhere costs no more than
// its size.
type depthWalker struct {
	fragments   map[string]int
	introspects bool
}

func (w *depthWalker) selections(set ast.SelectionSet) int {
	depth := 0
	for _, sel := range set {
		var d int
		switch s := sel.(type) {
		case *ast.Field:
			d = 1
			if s.Name == "__schema" || s.Name == "__type" {
				w.introspects = true
			} else {
				d += w.selections(s.SelectionSet)
			}
		case *ast.InlineFragment:
			d = w.selections(s.SelectionSet)
		case *ast.FragmentSpread:
			var ok bool
			if d, ok = w.fragments[s.Name]; !ok {
				// Validation refuses fragment cycles; the zero stored
				// first would end one anyway.
				w.fragments[s.Name] = 0
				if s.Definition != nil {
					d = w.selections(s.Definition.SelectionSet)
				}
				w.fragments[s.Name] = d
			}
		}
		depth = max(depth, d)
	}
	return depth
}
