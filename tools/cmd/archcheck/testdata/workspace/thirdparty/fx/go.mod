module go.uber.org/fx

go 1.26
