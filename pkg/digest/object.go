package digest

import "encoding/json"

func marshalObject(o Object) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
