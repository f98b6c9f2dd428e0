package graph

// The docs' pictures, drawn from the example specs by hinic deploy graph
// (make docs-img runs go generate here). TestDocImages redraws each in
// memory from these lines and fails when a picture is not current.
//
//go:generate go run ../../../../cmd/hinic deploy graph ../../../../testdata/racks/two-hicain-gpu.yaml --view front --out ../../../../docs/img/rack-front.svg
//go:generate go run ../../../../cmd/hinic deploy graph ../../../../testdata/racks/two-ib.yaml --view front --out ../../../../docs/img/two-racks.svg
//go:generate go run ../../../../cmd/hinic deploy graph ../../../../testdata/racks/two-racks-gpu.yaml --view logical --out ../../../../docs/img/logical.svg
//go:generate go run ../../../../cmd/hinic deploy graph ../../../../testdata/racks/two-racks-gpu.yaml --view flows --out ../../../../docs/img/flows.svg
