package pipelinetest

import "github.com/resetledger/resetledger/internal/dynamostore"

// Content returns the pipeline's sealed-content store.
func (p *Pipeline) Content() *dynamostore.Content {
	return dynamostore.NewContent(p.DB, p.ContentTable)
}
