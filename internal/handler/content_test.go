package handler_test

import "github.com/resetledger/resetledger/pkg/dynamostore"

func dynamoContent(p *pipeline) *dynamostore.Content { return dynamostore.NewContent(p.db, p.contentTable) }
