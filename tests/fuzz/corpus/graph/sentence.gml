Creator "attngraph: a short sentence with causal connectivity (each token sees itself and its past)"
graph [
  directed 1
  node [ id 0 label "nah" ]
  node [ id 1 label "I" ]
  node [ id 2 label "d" ]
  node [ id 3 label "win" ]
  edge [ source 0 target 0 ]
  edge [ source 0 target 1 ]
  edge [ source 1 target 1 ]
  edge [ source 0 target 2 ]
  edge [ source 1 target 2 ]
  edge [ source 2 target 2 ]
  edge [ source 0 target 3 ]
  edge [ source 1 target 3 ]
  edge [ source 2 target 3 ]
  edge [ source 3 target 3 ]
]
