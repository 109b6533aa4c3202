module kvc.dev/kvc-example

go 1.19

require kvc.dev/kvc v0.0.0

replace kvc.dev/kvc => ../../bindings/go
